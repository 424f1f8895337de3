package storage

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/internal/tcpproxy"
)

// A SQLite file that can't be written makes Open fail at start, naming
// the path, rather than the first click.
func TestOpenRefusesASQLiteFileThatCantBeWritten(t *testing.T) {
	path := filepath.Join(t.TempDir(), "airlock.db")
	db, err := Open(t.Context(), "sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	db, err = Open(t.Context(), "sqlite", "file:"+path+"?mode=ro")
	if err == nil {
		db.Close()
		t.Fatal("a read-only database opened")
	}
	if !strings.Contains(err.Error(), path) || !errors.Is(err, confirm.ErrUnavailable) {
		t.Fatalf("error %q: want the path and ErrUnavailable", err)
	}
}

// PostgreSQL taken away (every connection closed, new ones refused) and
// brought back: while it is away every call fails with ErrUnavailable and
// records nothing; once it is back the same DB works again by itself.
func TestPostgresAwayAndBack(t *testing.T) {
	admin, dsn := postgresAdmin(t)
	u, err := url.Parse(postgresSchema(t, admin, dsn))
	if err != nil {
		t.Fatal(err)
	}
	proxy := tcpproxy.New(t, u.Host)
	u.Host = proxy.Addr
	db, err := Open(t.Context(), "postgres", u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ctx := t.Context()
	if _, err := db.Conversation(ctx, "slack", "C1", "T1", false); err != nil {
		t.Fatal(err)
	}

	proxy.Cut()
	if _, err := db.Conversation(ctx, "slack", "C1", "T2", false); !errors.Is(err, confirm.ErrUnavailable) {
		t.Fatalf("a write while the database is away: %v, want ErrUnavailable", err)
	}
	if _, err := db.FindConversation(ctx, "slack", "C1", "T1"); !errors.Is(err, confirm.ErrUnavailable) {
		t.Fatalf("a read while the database is away: %v, want ErrUnavailable", err)
	}
	if err := db.Ping(ctx); !errors.Is(err, confirm.ErrUnavailable) {
		t.Fatalf("ping while away: %v", err)
	}

	proxy.Restore()
	if err := db.Ping(ctx); err != nil {
		t.Fatalf("ping once back: %v", err)
	}
	if _, err := db.FindConversation(ctx, "slack", "C1", "T2"); !errors.Is(err, confirm.ErrNotFound) {
		t.Fatalf("the write made while away was recorded: %v", err)
	}
	if _, err := db.Conversation(ctx, "slack", "C1", "T2", false); err != nil {
		t.Fatalf("a write once back: %v", err)
	}
}

// The caller's own deadline or cancellation is not the database being
// away: it is not classified ErrUnavailable.
func TestCallerDeadlineIsNotUnavailable(t *testing.T) {
	for _, err := range []error{context.DeadlineExceeded, context.Canceled, fmt.Errorf("query: %w", context.DeadlineExceeded)} {
		if errors.Is(classify(err), confirm.ErrUnavailable) {
			t.Fatalf("%v classified as the database unavailable", err)
		}
	}
	if !errors.Is(classify(&net.OpError{Op: "dial", Err: errors.New("connection refused")}), confirm.ErrUnavailable) {
		t.Fatal("a refused connection is not unavailable")
	}
}
