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
	return len(raceWinners(t, n, f))
}

// raceWinners is raceWins returning the indexes of the calls that
// returned true.
func raceWinners(t *testing.T, n int, f func(i int) (bool, error)) []int {
	t.Helper()
	oks, errs := race(n, f)
	var won []int
	for i := range n {
		if errs[i] != nil {
			t.Error(errs[i])
		}
		if oks[i] {
			won = append(won, i)
		}
	}
	return won
}

// raceAll races n calls of f (see race) and fails the test with every
// error they returned.
func raceAll(t *testing.T, n int, f func(i int) error) {
	t.Helper()
	_, errs := race(n, func(i int) (struct{}, error) { return struct{}{}, f(i) })
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

// openDB opens the database at dsn, closing it when the test ends.
func openDB(tb testing.TB, driver, dsn string, opts ...Option) *DB {
	tb.Helper()
	db, err := Open(tb.Context(), driver, dsn, opts...)
	if err != nil {
		tb.Fatalf("open %s: %v", driver, err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// openReplicas opens n pools on the one database at dsn, as n replicas
// would, closing them when the test ends.
func openReplicas(t *testing.T, driver, dsn string, n int) []*DB {
	t.Helper()
	dbs := make([]*DB, n)
	for i := range dbs {
		dbs[i] = openDB(t, driver, dsn)
	}
	return dbs
}
