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
//
// Each transaction reads it once and stamps every time it writes from
// that reading, and no caller passes a time in: one clock for all
// replicas. Tests replace it whole (WithClock) to control expiries.
type clock struct {
	offset atomic.Int64                     // nanoseconds: server minus local
	local  atomic.Pointer[func() time.Time] // nil: time.Now (tests skew it)
	fixed  atomic.Pointer[func() time.Time] // WithClock: replaces the database clock
}

func (c *clock) localNow() time.Time {
	if f := c.local.Load(); f != nil {
		return (*f)()
	}
	return time.Now()
}

func (c *clock) now() time.Time {
	if f := c.fixed.Load(); f != nil {
		return (*f)()
	}
	return c.localNow().Add(time.Duration(c.offset.Load()))
}

// WithClock makes now the store's clock in place of the database's (tests:
// a fake clock the bot shares, so expiries are decided by the test).
// SyncClock then measures nothing.
func WithClock(now func() time.Time) Option {
	return func(db *DB) { db.setClock(now) }
}

// setClock replaces the store's clock with now (nil: the database's again).
func (db *DB) setClock(now func() time.Time) {
	if now == nil {
		db.clock.fixed.Store(nil)
		return
	}
	db.clock.fixed.Store(&now)
}

// now is the database clock's current time.
func (db *DB) now() time.Time { return db.clock.now() }

// Clock returns a function giving the store's clock: the database server's
// current time (unless WithClock replaced it), the
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
	if db.driver != DriverPostgres || db.clock.fixed.Load() != nil {
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
