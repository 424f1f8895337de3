// Package racetest starts goroutines at once, for tests of what must
// happen once however many try at the same moment.
package racetest

import (
	"sync"
	"sync/atomic"
)

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

// Peak counts how many goroutines are inside a section at once, and the
// most that ever were since the last Reset.
type Peak struct{ now, most atomic.Int64 }

// Enter counts one more inside; the returned func counts it out again
// (defer p.Enter()()).
func (p *Peak) Enter() (leave func()) {
	n := p.now.Add(1)
	for {
		m := p.most.Load()
		if n <= m || p.most.CompareAndSwap(m, n) {
			break
		}
	}
	return func() { p.now.Add(-1) }
}

// Most is the most that were inside at once.
func (p *Peak) Most() int64 { return p.most.Load() }

// Reset forgets the most; those inside now count again as they enter.
func (p *Peak) Reset() { p.most.Store(0) }
