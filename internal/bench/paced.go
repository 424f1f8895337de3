package bench

import (
	"context"
	"errors"
	"os"
	"runtime/pprof"
	"sync"
	"time"
)

// pairs makes n pairs of requests at rate pairs a second, one of each a
// tick, each in a goroutine of its own (a slow answer holds nothing
// back), and returns the latencies of each side by index. It stops at the
// first errors (up to five, joined) once the sent ones have answered.
func pairs(ctx context.Context, n, rate int, first, second func(i int) (time.Duration, error)) ([]time.Duration, []time.Duration, error) {
	a, b := make([]time.Duration, n), make([]time.Duration, n)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if len(errs) < 5 {
			errs = append(errs, err)
		}
	}
	tick := time.Second / time.Duration(rate)
	start := time.Now()
	for i := 0; i < n && ctx.Err() == nil; i++ {
		time.Sleep(time.Until(start.Add(time.Duration(i) * tick)))
		wg.Go(func() {
			d, err := first(i)
			if err != nil {
				fail(err)
			}
			a[i] = d
		})
		wg.Go(func() {
			d, err := second(i)
			if err != nil {
				fail(err)
			}
			b[i] = d
		})
	}
	wg.Wait()
	return a, b, errors.Join(append(errs, ctx.Err())...)
}

// cpuProfile starts a CPU profile written to path ("": none); stop ends
// it.
func cpuProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
