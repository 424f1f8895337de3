//go:build cgo

package storage

/*
// From sqlite3.h, whose library go-sqlite3 links into the binary.
int sqlite3_config(int, ...);
long long sqlite3_memory_used(void);
#define AIRLOCK_SQLITE_CONFIG_MEMSTATUS 9

static int airlock_sqlite_memstatus_off(void) {
	return sqlite3_config(AIRLOCK_SQLITE_CONFIG_MEMSTATUS, 0);
}
*/
import "C"

// Kept (issue 24): with the counting on `airlock bench` fell below 1,000
// decisions/s on SQLite (BENCHMARKS.md "Tenth round").
//
// SQLite counts the memory it allocates (sqlite3_memory_used) unless told
// not to, and every allocation and free then takes one mutex shared by
// every connection of the process: the writer, the readers and the
// checkpointer, each on its own thread, queued on it, and the waits were
// futex calls. Airlock reads no such figure, so the counting is turned
// off, process-wide, before SQLite is first used: about 5% more decisions
// a second in `airlock bench` and less CPU for each. sqlite3_config may
// only run before SQLite initialises, hence at package initialisation
// (nothing opens a database before); later it would fail and change
// nothing.
func init() { sqliteMemstatusOn = C.airlock_sqlite_memstatus_off() != 0 }

// sqliteMemstatusOn: turning the counting off failed (tests).
var sqliteMemstatusOn bool

// sqliteMemoryUsed is SQLite's count of its memory in use: 0 while it
// does not count (tests).
func sqliteMemoryUsed() int64 { return int64(C.sqlite3_memory_used()) }
