package storage

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// clockSamples is how many round trips SyncClock measures; the one with the
// shortest round trip gives the offset.
const clockSamples = 3

// clock is local time plus the last measured offset to the database
// server's clock. The zero value is the local clock.
type clock struct {
	offset atomic.Int64                     // nanoseconds: server minus local
	local  atomic.Pointer[func() time.Time] // nil: time.Now (tests skew it)
}

func (c *clock) localNow() time.Time {
	if f := c.local.Load(); f != nil {
		return (*f)()
	}
	return time.Now()
}

func (c *clock) now() time.Time {
	return c.localNow().Add(time.Duration(c.offset.Load()))
}

// now is the database clock's current time.
func (db *DB) now() time.Time { return db.clock.now() }

// Clock returns a function giving the database server's current time: the
// local clock plus the offset the last SyncClock measured (zero before the
// first). Replicas whose local clocks disagree agree on it, so expiries,
// claims and leases compare times from one clock. Safe for concurrent use.
func (db *DB) Clock() func() time.Time { return db.clock.now }

// SyncClock measures the offset between the database server's clock and the
// local clock, which Clock then applies. On PostgreSQL it reads
// clock_timestamp() between two local readings and takes their midpoint as
// the moment the server read its clock (the best of a few round trips); a
// SQLite database is on this machine, so its offset is zero.
func (db *DB) SyncClock(ctx context.Context) error {
	if db.driver != DriverPostgres {
		db.clock.offset.Store(0)
		return nil
	}
	var (
		best    time.Duration
		bestRTT time.Duration = -1
	)
	for range clockSamples {
		var server time.Time
		t0 := db.clock.localNow()
		err := db.x.QueryRowContext(ctx, `SELECT clock_timestamp()`).Scan(&server)
		t1 := db.clock.localNow()
		if err != nil {
			return fmt.Errorf("sync clock: %w", err)
		}
		rtt := t1.Sub(t0)
		if bestRTT < 0 || rtt < bestRTT {
			bestRTT = rtt
			best = server.Sub(t0.Add(rtt / 2))
		}
	}
	db.clock.offset.Store(int64(best))
	return nil
}
