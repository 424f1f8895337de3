// Package pgtest gives tests an empty PostgreSQL schema of their own on
// the test server (AIRLOCK_TEST_POSTGRES_DSN), dropped when the test ends.
package pgtest

import (
	"database/sql"
	"fmt"
	"net/url"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers "pgx"
)

// FreshSchema makes an empty schema named prefix_<nanoseconds> in the
// database at dsn and returns a DSN whose search_path points at it. The
// schema is dropped when the test ends.
func FreshSchema(t testing.TB, dsn, prefix string) string {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	schema := fmt.Sprintf("%s_%d", prefix, time.Now().UnixNano())
	if _, err := db.Exec("CREATE SCHEMA " + schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		db, err := sql.Open("pgx", dsn)
		if err == nil {
			_, _ = db.Exec("DROP SCHEMA " + schema + " CASCADE")
			db.Close()
		}
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}
