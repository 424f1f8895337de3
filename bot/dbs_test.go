package bot_test

import (
	"os"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/internal/pgtest"
)

// harnessDriver is the storage driver of a harness's path: PostgreSQL for
// a postgres:// DSN (onBothDBs), else SQLite.
func harnessDriver(path string) string {
	if strings.HasPrefix(path, "postgres://") || strings.HasPrefix(path, "postgresql://") {
		return "postgres"
	}
	return "sqlite"
}

// onBothDBs runs fn on SQLite (path "": a new file) and, when
// AIRLOCK_TEST_POSTGRES_DSN is set (CI sets it), on a fresh PostgreSQL
// schema (path its DSN): a harness made from path uses that database.
func onBothDBs(t *testing.T, fn func(t *testing.T, path string)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, "") })
	t.Run("postgres", func(t *testing.T) {
		pg := os.Getenv("AIRLOCK_TEST_POSTGRES_DSN")
		if pg == "" {
			t.Skip("set AIRLOCK_TEST_POSTGRES_DSN (CI does) to run on PostgreSQL")
		}
		fn(t, pgtest.FreshSchema(t, pg, "bot"))
	})
}
