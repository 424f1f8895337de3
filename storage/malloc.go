//go:build cgo

package storage

import (
	"os"
	"strings"
	"sync"
)

// Kept (issue 24): without the raised threshold `airlock bench` fell below
// 1,000 decisions/s on SQLite (BENCHMARKS.md "Tenth round").
//
// SQLite's memory and the C allocator. In WAL mode a read connection
// drops its whole page cache when another connection has committed since
// its last read, which under load is before nearly every read: the pages
// are freed and allocated again at once. glibc's malloc gives freed memory
// at the top of its heap back to the kernel once it exceeds 128 KiB
// (M_TRIM_THRESHOLD), so that churn became brk calls, each flushing the
// TLBs of every core, and page faults to take the memory back: about a
// tenth of the storage's CPU in BenchmarkDecisionPath. Airlock raises the
// threshold to keepFreedCMemory, once, when it opens a SQLite database.
// What is kept is bounded by the most SQLite ever held at once (its
// caches are 1 MiB on the writer and 512 KiB a reader). An operator who
// tunes malloc (MALLOC_TRIM_THRESHOLD_, or glibc.malloc.trim_threshold in
// GLIBC_TUNABLES) keeps their setting.
const keepFreedCMemory = 64 << 20

var trimOnce sync.Once

// keepFreedMemory applies keepFreedCMemory unless the environment tunes
// the threshold itself.
func keepFreedMemory() {
	trimOnce.Do(func() {
		if operatorTunesTrim(os.Getenv) {
			return
		}
		setTrimThreshold(keepFreedCMemory)
	})
}

// operatorTunesTrim reports whether the environment sets malloc's trim
// threshold.
func operatorTunesTrim(getenv func(string) string) bool {
	return getenv("MALLOC_TRIM_THRESHOLD_") != "" || strings.Contains(getenv("GLIBC_TUNABLES"), "trim_threshold")
}
