package storage

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// The checkpoint job copies the WAL into the file beside a stream of
// writes, none of which waits for it or is lost; once the writes stop, a
// run leaves nothing in the WAL to copy. On PostgreSQL, or a SQLite
// database in memory, there is no such job.
func TestWALCheckpointBesideTheWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "airlock.db")
	db := openDB(t, DriverSQLite, path)
	ctx := t.Context()
	if js := db.Jobs(); len(js) != 1 || js[0].Name != JobWALCheckpoint {
		t.Fatalf("jobs of a SQLite file: %+v", js)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := db.CheckpointWAL(ctx); err != nil {
				t.Error(err)
				return
			}
		}
	})
	const n = 500
	for i := range n {
		if _, err := db.AcquireLease(ctx, fmt.Sprintf("k%d", i), "holder", time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if err := db.CheckpointWAL(ctx); err != nil {
		t.Fatal(err)
	}
	var busy, logFrames, copied int
	if err := db.ck.QueryRowxContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &logFrames, &copied); err != nil {
		t.Fatal(err)
	}
	if logFrames != copied {
		t.Fatalf("after the writes, %d of %d WAL frames copied", copied, logFrames)
	}
	for _, k := range []string{"k0", fmt.Sprintf("k%d", n-1)} {
		if !leaseExists(t, db, k) {
			t.Fatalf("%s lost", k)
		}
	}
	if js := openDB(t, DriverSQLite, "file::memory:?cache=shared").Jobs(); len(js) != 0 {
		t.Fatalf("jobs of a database in memory: %+v", js)
	}
}
