// Package racetest starts goroutines at once, for tests of what must
// happen once however many try at the same moment.
package racetest

import "sync"

// AtOnce runs f(0) … f(n-1) each on its own goroutine, all released
// together from one barrier, and returns when every one has returned.
func AtOnce(n int, f func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			f(i)
		})
	}
	close(start)
	wg.Wait()
}
