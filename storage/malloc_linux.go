//go:build linux && cgo

package storage

/*
#include <malloc.h>

static void airlock_set_trim_threshold(int bytes) {
#ifdef M_TRIM_THRESHOLD
	mallopt(M_TRIM_THRESHOLD, bytes);
#endif
}
*/
import "C"

// setTrimThreshold tells the C allocator (glibc's malloc, which SQLite's
// page caches use) to keep up to bytes of freed memory at the top of its
// heap rather than give it back to the kernel.
func setTrimThreshold(bytes int) { C.airlock_set_trim_threshold(C.int(bytes)) }
