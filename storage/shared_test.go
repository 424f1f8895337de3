package storage

import (
	"sync"
	"testing"
)

// conformanceTest is one test of the store contract that runConformance
// runs on a fresh database (an alias, so a table may still spell the
// struct out).
type conformanceTest = struct {
	name string
	fn   func(t *testing.T, db *DB)
}

// race calls f(0), …, f(n-1) on n goroutines released at the same moment,
// waits for all of them, and returns each call's result and error by index.
func race[T any](n int, f func(i int) (T, error)) ([]T, []error) {
	results := make([]T, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			results[i], errs[i] = f(i)
		})
	}
	close(start)
	wg.Wait()
	return results, errs
}

// raceWins races n calls of f (see race), reports every error with t.Error,
// and returns how many calls returned true.
func raceWins(t *testing.T, n int, f func(i int) (bool, error)) int {
	t.Helper()
	oks, errs := race(n, f)
	wins := 0
	for i := range n {
		if errs[i] != nil {
			t.Error(errs[i])
		}
		if oks[i] {
			wins++
		}
	}
	return wins
}

// openReplicas opens n pools on the one database at dsn, as n replicas
// would, closing them when the test ends.
func openReplicas(t *testing.T, driver, dsn string, n int) []*DB {
	t.Helper()
	dbs := make([]*DB, n)
	for i := range dbs {
		db, err := Open(t.Context(), driver, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		dbs[i] = db
	}
	return dbs
}
