package storage

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/confirm"
)

// heapWatch is a writer that samples the Go heap every MiB written.
type heapWatch struct {
	w       io.Writer
	written int
	peak    uint64
}

func (h *heapWatch) Write(p []byte) (int, error) {
	h.written += len(p)
	if h.written >= 1<<20 {
		h.written = 0
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		h.peak = max(h.peak, m.HeapAlloc)
	}
	return h.w.Write(p)
}

// TestSQLiteAuditExportRoundTrip exports 100,000 rows of about 600 bytes (a
// 60 MB export) and verifies the file: the export streams, its heap
// staying far below the export's size, and the file's chain ends at the
// database's head.
func TestSQLiteAuditExportRoundTrip(t *testing.T) {
	if raceEnabled {
		// One goroutine streams 100,000 rows: nothing for the race
		// detector, which makes it ten times slower. It runs without.
		t.Skip("a memory bound of one goroutine; run without -race")
	}
	ctx := t.Context()
	db := openSQLite(t)
	const rows = 100_000
	pad := strings.Repeat("x", 500)
	start := time.Now()
	err := db.tx(ctx, func(tx *txn) error {
		for i := range rows {
			if err := db.insertAudit(ctx, tx, confirm.AuditEvent{Kind: confirm.AuditDecision, ConversationID: int64(i % 10),
				Tool: "deploy", Actor: "U1", Detail: fmt.Sprintf(`{"n":%d,"pad":"%s"}`, i, pad)}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("inserted: %v", time.Since(start))
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	w := &heapWatch{w: f}
	if err := db.ExportAudit(ctx, AuditRecordFilter{}, "jsonl", w); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); fi.Size() < rows*500 {
		t.Fatalf("export of %d bytes", fi.Size())
	}
	if w.peak == 0 || w.peak > 24<<20 {
		t.Errorf("heap peaked at %d MiB while exporting %d MB: not streaming", w.peak>>20, rows/2000)
	}
	t.Logf("exported: %v", time.Since(start))
	v, err := VerifyAuditExport(ctx, path)
	t.Logf("verified: %v", time.Since(start))
	if err != nil {
		t.Fatal(err)
	}
	headID, headHash, err := db.AuditHead(ctx)
	if err != nil || v.Rows != rows || v.HeadID != headID || v.HeadHash != headHash {
		t.Fatalf("verify export: %+v, want %d rows to head %d %s (%v)", v, rows, headID, headHash, err)
	}
}

// The export's filters select rows; a filtered export's rows still carry
// their hashes, and CSV has the documented columns.
func testAuditExportFilters(t *testing.T, db *DB) {
	ctx := t.Context()
	conv := newConversation(t, db)
	for i, tool := range []string{"deploy", "ls", "deploy"} {
		if err := db.Audit(ctx, confirm.AuditEvent{Kind: confirm.AuditDecision, ConversationID: conv.ID, Tool: tool, Actor: fmt.Sprint("U", i)}); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	if err := db.ExportAudit(ctx, AuditRecordFilter{Tool: "deploy", Actor: "U2"}, "csv", &out); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&out).ReadAll()
	if err != nil || len(recs) != 2 || strings.Join(recs[0], ",") != strings.Join(exportColumns, ",") || recs[1][7] != "U2" || len(recs[1][10]) != 64 {
		t.Fatalf("csv export: %q, %v", recs, err)
	}
	// By thread prefix (a gateway client's sessions): only the rows of
	// conversations whose thread begins so; a prefix's LIKE wildcards are
	// plain characters.
	for _, th := range []string{"gateway/cc/s1", "mcp/cc/s2", "gateway/ccx/s3", "gateway/c%/s4"} {
		c, err := db.Conversation(ctx, "gateway", "cc", th, false)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Audit(ctx, confirm.AuditEvent{Kind: confirm.AuditDecision, ConversationID: c.ID, Tool: "deploy", Actor: th}); err != nil {
			t.Fatal(err)
		}
	}
	for prefixes, want := range map[string]string{"gateway/cc/ mcp/cc/": "gateway/cc/s1 mcp/cc/s2", "gateway/c%/": "gateway/c%/s4", "gateway/c_/": ""} {
		rs, err := db.RecentAudit(ctx, AuditRecordFilter{ThreadPrefixes: strings.Fields(prefixes)}, 10)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range rs {
			got = append(got, r.Actor)
		}
		slices.Sort(got)
		if strings.Join(got, " ") != want {
			t.Errorf("rows of %s: %q, want %q", prefixes, got, want)
		}
	}
}
