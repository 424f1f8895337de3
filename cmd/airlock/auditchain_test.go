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
	if code, out, errOut := verify("-config", cfg); code != 0 || !strings.Contains(out, "0 rows") {
		t.Fatalf("fresh: exit %d: %s%s", code, out, errOut)
	}
	db, err := storage.Open(ctx, driver, dsn)
	if err != nil {
		t.Fatal(err)
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
