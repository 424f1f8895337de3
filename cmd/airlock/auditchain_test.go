package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/storage"
)

func TestAuditVerifySQLite(t *testing.T) {
	dsn := filepath.Join(t.TempDir(), "a.db")
	testAuditVerify(t, "sqlite", dsn, func(t *testing.T) *sql.DB {
		db, err := sql.Open("sqlite3", dsn)
		if err != nil {
			t.Fatal(err)
		}
		return db
	})
}

func TestAuditVerifyPostgres(t *testing.T) {
	pg := os.Getenv("AIRLOCK_TEST_POSTGRES_DSN")
	if pg == "" {
		t.Skip("AIRLOCK_TEST_POSTGRES_DSN not set")
	}
	dsn := freshSchema(t, pg)
	testAuditVerify(t, "postgres", dsn, func(t *testing.T) *sql.DB {
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			t.Fatal(err)
		}
		return db
	})
}

// testAuditVerify: `airlock audit verify` passes on a fresh database and
// after rows, and once a row is edited by hand (triggers dropped) exits 1
// naming it; `-file` verifies an export and names an edited line's row.
func testAuditVerify(t *testing.T, driver, dsn string, raw func(t *testing.T) *sql.DB) {
	ctx := context.Background()
	cfg := writeFile(t, "c.yaml", fmt.Sprintf("storage: {driver: %s, dsn: '%s'}\nmodel: {provider: openai, name: m}\n", driver, dsn))
	verify := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := run(ctx, append([]string{"audit", "verify"}, args...), nil, &out, &errOut)
		return code, out.String(), errOut.String()
	}
	db, err := storage.Open(ctx, driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := verify("-config", cfg); code != 0 || !strings.Contains(out, "0 rows") {
		t.Fatalf("fresh: exit %d: %s%s", code, out, errOut)
	}
	for i := range 5 {
		if err := db.Audit(ctx, confirm.AuditEvent{Kind: confirm.AuditDecision, Tool: "deploy", Actor: fmt.Sprint("U", i)}); err != nil {
			t.Fatal(err)
		}
	}
	_, head, _ := db.AuditHead(ctx)
	db.Close()
	code, out, errOut := verify("-config", cfg)
	if code != 0 || !strings.Contains(out, "5 rows") || !strings.Contains(out, head) {
		t.Fatalf("5 rows: exit %d: %s%s", code, out, errOut)
	}

	// A signed checkpoint of the head verifies with its key, not another's.
	headID, _, _ := func() (int64, string, error) {
		db, err := storage.Open(ctx, driver, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		return db.AuditHead(ctx)
	}()
	pub, key, _ := ed25519.GenerateKey(nil)
	otherPub, _, _ := ed25519.GenerateKey(nil)
	cp := storage.AuditCheckpoint{ID: headID, Hash: head, At: time.Now()}
	cp.Sign(key)
	cpJSON, _ := json.Marshal(cp)
	cpFile := writeFile(t, "checkpoint.json", string(cpJSON))
	pubFile := writeFile(t, "pub.b64", base64.StdEncoding.EncodeToString(pub)+"\n")
	otherFile := writeFile(t, "other.b64", base64.StdEncoding.EncodeToString(otherPub))
	if code, out, errOut := verify("-config", cfg, "-checkpoint", cpFile, "-pubkey", pubFile); code != 0 || !strings.Contains(out, "5 rows") {
		t.Fatalf("with a signed checkpoint: exit %d: %s%s", code, out, errOut)
	}
	if code, out, errOut := verify("-config", cfg, "-checkpoint", cpFile, "-pubkey", otherFile); code != 1 || !strings.Contains(errOut, "signature") {
		t.Fatalf("with another key: exit %d: %s%s", code, out, errOut)
	}

	export := filepath.Join(t.TempDir(), "audit.jsonl")
	var exported, errOut2 bytes.Buffer
	if code := run(ctx, []string{"audit", "export", "-config", cfg, "-format", "jsonl"}, nil, &exported, &errOut2); code != 0 {
		t.Fatalf("export: exit %d: %s", code, errOut2.String())
	}
	if err := os.WriteFile(export, exported.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := verify("-file", export); code != 0 || !strings.Contains(out, "5 rows") || !strings.Contains(out, head) {
		t.Fatalf("verify -file: exit %d: %s%s", code, out, errOut)
	}
	lines := strings.Split(exported.String(), "\n")
	lines[2] = strings.Replace(lines[2], `"actor":"U2"`, `"actor":"U-mallory"`, 1)
	third := regexp.MustCompile(`"id":(\d+)`).FindStringSubmatch(lines[2])[1]
	if err := os.WriteFile(export, []byte(strings.Join(lines, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := verify("-file", export); code != 1 || !strings.Contains(errOut, "audit row "+third+" edited") {
		t.Fatalf("verify -file of an edited export: exit %d: %s%s", code, out, errOut)
	}

	r := raw(t)
	defer r.Close()
	drop := []string{`DROP TRIGGER audit_no_update`}
	update := `UPDATE audit SET actor = 'U-mallory' WHERE id = ` + third
	if driver == "postgres" {
		drop = []string{`DROP TRIGGER audit_no_update ON audit`}
	}
	for _, q := range append(drop, update) {
		if _, err := r.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if code, out, errOut := verify("-config", cfg); code != 1 || !strings.Contains(errOut, "audit row "+third+" edited") {
		t.Fatalf("after an edit: exit %d: %s%s", code, out, errOut)
	}
}

func TestAuditVerifyReadOnlySQLite(t *testing.T) {
	dsn := filepath.Join(t.TempDir(), "a.db")
	testAuditVerifyReadOnly(t, "sqlite", dsn, func(t *testing.T) *sql.DB {
		db, err := sql.Open("sqlite3", dsn)
		if err != nil {
			t.Fatal(err)
		}
		return db
	}, func(t *testing.T) string {
		b, err := os.ReadFile(dsn)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	})
	// A database that is not there is an error; verify makes no file.
	missing := filepath.Join(t.TempDir(), "none.db")
	cfg := writeFile(t, "missing.yaml", fmt.Sprintf("storage: {driver: sqlite, dsn: '%s'}\nmodel: {provider: openai, name: m}\n", missing))
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"audit", "verify", "-config", cfg}, nil, &out, &errOut); code != 1 {
		t.Fatalf("verify of a missing database: exit %d: %s%s", code, out.String(), errOut.String())
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Fatalf("verify made %s: %v", missing, err)
	}
}

func TestAuditVerifyReadOnlyPostgres(t *testing.T) {
	pg := os.Getenv("AIRLOCK_TEST_POSTGRES_DSN")
	if pg == "" {
		t.Skip("AIRLOCK_TEST_POSTGRES_DSN not set")
	}
	dsn := freshSchema(t, pg)
	raw := func(t *testing.T) *sql.DB {
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			t.Fatal(err)
		}
		return db
	}
	testAuditVerifyReadOnly(t, "postgres", dsn, raw, func(t *testing.T) string {
		r := raw(t)
		defer r.Close()
		var s string
		if err := r.QueryRowContext(context.Background(), `SELECT
			(SELECT string_agg(id || ':' || prev_hash || ':' || hash, ',' ORDER BY id) FROM audit) || '|' ||
			(SELECT last_id || ':' || last_hash FROM audit_head) || '|' ||
			(SELECT count(*) FROM schema_migrations) || '|' || (SELECT count(*) FROM audit_checkpoints)`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// testAuditVerifyReadOnly: a row inserted by hand with no hashes is named
// unchained by `airlock audit verify` every time it runs: verify opens the
// database read-only, so it chains nothing, migrates nothing and writes
// nothing (state: the database's contents, before and after).
func testAuditVerifyReadOnly(t *testing.T, driver, dsn string, raw func(t *testing.T) *sql.DB, state func(t *testing.T) string) {
	ctx := context.Background()
	cfg := writeFile(t, "c.yaml", fmt.Sprintf("storage: {driver: %s, dsn: '%s'}\nmodel: {provider: openai, name: m}\n", driver, dsn))
	db, err := storage.Open(ctx, driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := db.Audit(ctx, confirm.AuditEvent{Kind: confirm.AuditDecision, Tool: "deploy", Actor: fmt.Sprint("U", i)}); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	r := raw(t)
	var forged int64
	if err := r.QueryRowContext(ctx, r2q(driver, `INSERT INTO audit (at, kind, conversation_id, batch_id, call_key, tool, actor, detail)
		VALUES (?, 'decision', 0, '', '', 'deploy', 'U-mallory', '{"status":"allowed"}') RETURNING id`), time.Now().UTC().Format("2006-01-02T15:04:05.000000000Z07:00")).Scan(&forged); err != nil {
		t.Fatal(err)
	}
	r.Close()
	before := state(t)
	for i := range 2 {
		var out, errOut bytes.Buffer
		code := run(ctx, []string{"audit", "verify", "-config", cfg}, nil, &out, &errOut)
		if want := fmt.Sprintf("audit row %d unchained", forged); code != 1 || !strings.Contains(errOut.String(), want) {
			t.Fatalf("verify %d: exit %d, want 1 with %q: %s%s", i+1, code, want, out.String(), errOut.String())
		}
	}
	if after := state(t); after != before {
		t.Fatalf("verify changed the database:\nbefore %.300q\nafter  %.300q", before, after)
	}
}

// r2q rewrites ? placeholders for a raw connection of driver.
func r2q(driver, q string) string {
	if driver != "postgres" {
		return q
	}
	var b strings.Builder
	n := 0
	for _, c := range q {
		if c == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

func TestAuditVerifyUncheckedCheckpointsSQLite(t *testing.T) {
	dsn := filepath.Join(t.TempDir(), "a.db")
	testAuditVerifyUncheckedCheckpoints(t, "sqlite", dsn, func(t *testing.T) *sql.DB {
		db, err := sql.Open("sqlite3", dsn)
		if err != nil {
			t.Fatal(err)
		}
		return db
	})
}

func TestAuditVerifyUncheckedCheckpointsPostgres(t *testing.T) {
	pg := os.Getenv("AIRLOCK_TEST_POSTGRES_DSN")
	if pg == "" {
		t.Skip("AIRLOCK_TEST_POSTGRES_DSN not set")
	}
	dsn := freshSchema(t, pg)
	testAuditVerifyUncheckedCheckpoints(t, "postgres", dsn, func(t *testing.T) *sql.DB {
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			t.Fatal(err)
		}
		return db
	})
}

// testAuditVerifyUncheckedCheckpoints: someone with the database deletes
// the oldest rows and stores a start checkpoint of their own making where
// the prune's would be. `airlock audit verify` with no key to check it
// says loudly that the stored checkpoints were not checked and fails
// (unless -allow-unchecked-checkpoints accepts that); with -pubkey, or a
// config holding audit.signing_key, it names the checkpoint forged.
func testAuditVerifyUncheckedCheckpoints(t *testing.T, driver, dsn string, raw func(t *testing.T) *sql.DB) {
	ctx := context.Background()
	dir := t.TempDir()
	keyPath, pubPath, key := auditKeyFiles(t, dir)
	cfg := writeFile(t, "c.yaml", fmt.Sprintf("storage: {driver: %s, dsn: '%s'}\nmodel: {provider: openai, name: m}\n", driver, dsn))
	keyed := writeFile(t, "keyed.yaml", fmt.Sprintf("storage: {driver: %s, dsn: '%s'}\nmodel: {provider: openai, name: m}\naudit: {signing_key: '${file:%s}'}\n", driver, dsn, keyPath))
	verify := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := run(ctx, append([]string{"audit", "verify"}, args...), nil, &out, &errOut)
		return code, out.String(), errOut.String()
	}
	db, err := storage.Open(ctx, driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	var rows []storage.AuditRecord
	for i := range 6 {
		if err := db.Audit(ctx, confirm.AuditEvent{Kind: confirm.AuditDecision, Tool: "deploy", Actor: fmt.Sprint("U", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if c, err := db.CheckpointAudit(ctx, key, storage.CheckpointPolicy{Rows: 1, Interval: time.Hour}); err != nil || c == nil {
		t.Fatalf("checkpoint: %v, %v", c, err)
	}
	if err := db.AuditRecords(ctx, 0, storage.AuditRecordFilter{}, func(r storage.AuditRecord) error { rows = append(rows, r); return nil }); err != nil {
		t.Fatal(err)
	}
	db.Close()

	if code, out, errOut := verify("-config", cfg); code != 3 || !strings.Contains(errOut, "1 stored checkpoint") || !strings.Contains(errOut, "NOT checked") ||
		!strings.Contains(errOut, "-pubkey") || !strings.Contains(errOut, "-allow-unchecked-checkpoints") {
		t.Fatalf("no key: exit %d, want 3 saying the checkpoints were not checked: %s%s", code, out, errOut)
	}
	if code, out, errOut := verify("-config", cfg, "-allow-unchecked-checkpoints"); code != 0 || !strings.Contains(errOut, "NOT checked") {
		t.Fatalf("no key, accepted: exit %d: %s%s", code, out, errOut)
	}
	if code, out, errOut := verify("-config", cfg, "-pubkey", pubPath); code != 0 || !strings.Contains(out, "stored checkpoints verified: 1") {
		t.Fatalf("-pubkey: exit %d: %s%s", code, out, errOut)
	}
	if code, out, errOut := verify("-config", keyed); code != 0 || !strings.Contains(out, "stored checkpoints verified: 1 (with the public half of audit.signing_key)") {
		t.Fatalf("the config's key: exit %d: %s%s", code, out, errOut)
	}

	// The oldest three rows deleted, behind a start checkpoint nobody
	// holding the key signed.
	_, other, _ := ed25519.GenerateKey(nil)
	start := storage.AuditCheckpoint{ID: rows[2].ID, Hash: rows[2].Hash, At: time.Now(), Start: true}
	start.Sign(other)
	r := raw(t)
	defer r.Close()
	drop := `DROP TRIGGER audit_no_delete`
	if driver == "postgres" {
		drop = `DROP TRIGGER audit_append_only ON audit`
	}
	for _, q := range []struct {
		q    string
		args []any
	}{
		{drop, nil},
		{r2q(driver, `DELETE FROM audit WHERE id <= ?`), []any{rows[2].ID}},
		{r2q(driver, `INSERT INTO audit_checkpoints (head_id, head_hash, at, signature, public_key, start) VALUES (?, ?, ?, ?, ?, ?)`),
			[]any{start.ID, start.Hash, start.At.UTC().Format("2006-01-02T15:04:05.000000000Z07:00"), start.Signature, start.PublicKey, true}},
	} {
		if _, err := r.ExecContext(ctx, q.q, q.args...); err != nil {
			t.Fatalf("%s: %v", q.q, err)
		}
	}
	if code, out, errOut := verify("-config", cfg); code != 3 || !strings.Contains(errOut, "2 stored checkpoints (1 start checkpoint)") || !strings.Contains(errOut, "NOT checked") {
		t.Fatalf("a forged start, no key: exit %d, want 3: %s%s", code, out, errOut)
	}
	want := fmt.Sprintf("audit row %d forged", rows[2].ID)
	if code, out, errOut := verify("-config", cfg, "-pubkey", pubPath); code != 1 || !strings.Contains(errOut, want) {
		t.Fatalf("a forged start, -pubkey: exit %d, want 1 naming %q: %s%s", code, want, out, errOut)
	}
	if code, out, errOut := verify("-config", keyed); code != 1 || !strings.Contains(errOut, want) {
		t.Fatalf("a forged start, the config's key: exit %d, want 1 naming %q: %s%s", code, want, out, errOut)
	}
}

func TestAuditVerifyForgedRowSQLite(t *testing.T) {
	dsn := filepath.Join(t.TempDir(), "a.db")
	testAuditVerifyForgedRow(t, "sqlite", dsn, func(t *testing.T) *sql.DB {
		db, err := sql.Open("sqlite3", dsn)
		if err != nil {
			t.Fatal(err)
		}
		return db
	})
}

func TestAuditVerifyForgedRowPostgres(t *testing.T) {
	pg := os.Getenv("AIRLOCK_TEST_POSTGRES_DSN")
	if pg == "" {
		t.Skip("AIRLOCK_TEST_POSTGRES_DSN not set")
	}
	dsn := freshSchema(t, pg)
	testAuditVerifyForgedRow(t, "postgres", dsn, func(t *testing.T) *sql.DB {
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			t.Fatal(err)
		}
		return db
	})
}

// testAuditVerifyForgedRow: rows written by Airlock with audit.signing_key
// carry MACs; a row appended by hand with a correctly computed hash, the
// head moved to it, is named by `airlock audit verify` with the config's
// key, and without the key verify passes but says the MACs were not
// checked.
func testAuditVerifyForgedRow(t *testing.T, driver, dsn string, raw func(t *testing.T) *sql.DB) {
	ctx := context.Background()
	dir := t.TempDir()
	keyPath, pubPath, key := auditKeyFiles(t, dir)
	plain := writeFile(t, "c.yaml", fmt.Sprintf("storage: {driver: %s, dsn: '%s'}\nmodel: {provider: openai, name: m}\n", driver, dsn))
	keyed := writeFile(t, "keyed.yaml", fmt.Sprintf("storage: {driver: %s, dsn: '%s'}\nmodel: {provider: openai, name: m}\naudit: {signing_key: '${file:%s}'}\n", driver, dsn, keyPath))
	verify := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := run(ctx, append([]string{"audit", "verify"}, args...), nil, &out, &errOut)
		return code, out.String(), errOut.String()
	}
	db, err := storage.Open(ctx, driver, dsn, storage.WithAuditKey(key))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := db.Audit(ctx, confirm.AuditEvent{Kind: confirm.AuditDecision, Tool: "deploy", Actor: fmt.Sprint("U", i)}); err != nil {
			t.Fatal(err)
		}
	}
	headID, headHash, _ := db.AuditHead(ctx)
	db.Close()
	if code, out, errOut := verify("-config", keyed); code != 0 || !strings.Contains(out, "row MACs verified: 3 rows") {
		t.Fatalf("Airlock's rows: exit %d: %s%s", code, out, errOut)
	}
	f := storage.AuditRecord{ID: headID + 1, At: time.Now().UTC().Truncate(time.Microsecond), Kind: "decision", Tool: "deploy", Actor: "U-mallory",
		Detail: `{"status":"allowed"}`, PrevHash: headHash}
	f.Hash = storage.AuditHash(f.PrevHash, f)
	r := raw(t)
	defer r.Close()
	insert := `INSERT INTO audit (id, at, kind, conversation_id, batch_id, call_key, tool, actor, detail, prev_hash, hash) VALUES (?, ?, ?, 0, '', '', ?, ?, ?, ?, ?)`
	at := any(f.At.Format("2006-01-02T15:04:05.000000000Z07:00"))
	if driver == "postgres" {
		insert = strings.Replace(insert, ") VALUES", ") OVERRIDING SYSTEM VALUE VALUES", 1)
		at = f.At
	}
	if _, err := r.ExecContext(ctx, r2q(driver, insert), f.ID, at, f.Kind, f.Tool, f.Actor, f.Detail, f.PrevHash, f.Hash); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ExecContext(ctx, r2q(driver, `UPDATE audit_head SET last_id = ?, last_hash = ? WHERE one = 1`), f.ID, f.Hash); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("audit row %d unauthenticated", f.ID)
	if code, out, errOut := verify("-config", keyed); code != 1 || !strings.Contains(errOut, want) {
		t.Fatalf("a forged row, the config's key: exit %d, want 1 naming %q: %s%s", code, want, out, errOut)
	}
	if code, out, errOut := verify("-config", plain, "-pubkey", pubPath); code != 0 || !strings.Contains(errOut, "row MACs NOT checked") {
		t.Fatalf("a forged row, no key: exit %d, want 0 saying the MACs were not checked: %s%s", code, out, errOut)
	}
}
