package bench

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/airlockhq/airlock/storage"
)

// postgresSchema makes a fresh schema on the PostgreSQL server and returns a
// DSN using it, and a function dropping it.
func postgresSchema(ctx context.Context, dsn string) (string, func(), error) {
	admin, err := sqlx.Open("pgx", dsn)
	if err != nil {
		return "", nil, err
	}
	schema := fmt.Sprintf("airlock_bench_%d_%d", os.Getpid(), time.Now().UnixNano()%1e9)
	if _, err := admin.ExecContext(ctx, `CREATE SCHEMA `+schema); err != nil {
		admin.Close()
		return "", nil, fmt.Errorf("create schema: %w", err)
	}
	drop := func() {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = admin.ExecContext(dctx, `DROP SCHEMA `+schema+` CASCADE`)
		admin.Close()
	}
	if !strings.Contains(dsn, "://") {
		return dsn + " search_path=" + schema, drop, nil
	}
	u, err := url.Parse(dsn)
	if err != nil {
		drop()
		return "", nil, err
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), drop, nil
}

// rawCommitRuns is how many times the raw-commit baseline is measured;
// the report gives the median. One run lasts a fraction of a second, and
// on a shared machine single runs of the same build differed by a sixth.
const rawCommitRuns = 3

// medianRawCommits is the median of rawCommitRuns runs of
// rawCommits, each on a table of its own (the file gets a suffix on
// SQLite).
func medianRawCommits(ctx context.Context, driver, dsn string, n int) (float64, error) {
	runs := make([]float64, 0, rawCommitRuns)
	for i := range rawCommitRuns {
		d := dsn
		if driver == storage.DriverSQLite {
			d = fmt.Sprintf("%s.%d", dsn, i)
		}
		r, err := rawCommits(ctx, driver, d, n)
		if err != nil {
			return 0, err
		}
		runs = append(runs, r)
	}
	slices.Sort(runs)
	return runs[len(runs)/2], nil
}
