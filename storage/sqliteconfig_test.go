package storage

import (
	"path/filepath"
	"testing"
)

// SQLite does not count its memory (a mutex every connection would share
// on every allocation): the setting took, before SQLite initialised.
func TestSQLiteDoesNotCountMemory(t *testing.T) {
	if sqliteMemstatusOn {
		t.Fatal("sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0) failed: SQLite was used before the storage package initialised")
	}
	db, err := Open(t.Context(), "sqlite", filepath.Join(t.TempDir(), "airlock.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conv, err := db.Conversation(t.Context(), "slack", "C1", "t1", false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Messages(t.Context(), conv.ID); err != nil {
		t.Fatal(err)
	}
	if n := sqliteMemoryUsed(); n != 0 {
		t.Fatalf("SQLite counts its memory: %d bytes in use", n)
	}
}
