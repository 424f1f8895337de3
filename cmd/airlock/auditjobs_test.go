package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/x509"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/model/modeltest"
	"github.com/airlockhq/airlock/storage"
)

// auditKeyFiles writes an Ed25519 key pair: the private key as PEM PKCS#8
// (what audit.signing_key reads) and the public key in base64 (what
// verify -pubkey reads).
func auditKeyFiles(t *testing.T, dir string) (keyPath, pubPath string, key ed25519.PrivateKey) {
	t.Helper()
	pub, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	keyPath, pubPath = filepath.Join(dir, "audit.key"), filepath.Join(dir, "audit.pub")
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pubPath, []byte(base64.StdEncoding.EncodeToString(pub)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return keyPath, pubPath, key
}

// TestRunWritesAuditCheckpoints: `airlock run` with audit.signing_key runs
// audit-checkpoint, which stores a signed checkpoint of the head and sends
// it as the audit_checkpoint webhook event; the event's checkpoint, saved
// as a file, verifies with `airlock audit verify -checkpoint -pubkey`,
// which also checks the stored one.
// auditRunConfig writes the config of an `airlock run` on the SQLite file
// dbPath with the model at modelURL and the sections in rest, and returns
// where it listens and the config's path.
func auditRunConfig(t *testing.T, dir, dbPath, modelURL, rest string) (addr, cfgPath string) {
	t.Helper()
	addr, cfgPath = freeAddr(t), filepath.Join(dir, "airlock.yaml")
	cfg := fmt.Sprintf("listen: %s\nstorage: {dsn: %q}\nmodel: {provider: openai, name: fake, base_url: %q}\n", addr, dbPath, modelURL) + rest
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return addr, cfgPath
}

func TestRunWritesAuditCheckpoints(t *testing.T) {
	var mu sync.Mutex
	var got []json.RawMessage
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var ev struct {
			Type       string          `json:"type"`
			Checkpoint json.RawMessage `json:"checkpoint"`
		}
		if json.Unmarshal(b, &ev) == nil && ev.Type == "audit_checkpoint" {
			mu.Lock()
			got = append(got, ev.Checkpoint)
			mu.Unlock()
		}
	}))
	t.Cleanup(hook.Close)
	model := modeltest.NewOpenAIServer(t, func(modeltest.OpenAIRequest) modeltest.OpenAIReply { return modeltest.TextReply("hi") })
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "airlock.db")
	db, err := storage.Open(context.Background(), "sqlite", dbPath)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := db.Audit(context.Background(), confirm.AuditEvent{Kind: confirm.AuditDecision, Tool: "deploy", Actor: fmt.Sprint("U", i)}); err != nil {
			t.Fatal(err)
		}
	}
	headID, headHash, _ := db.AuditHead(context.Background())
	db.Close()
	keyPath, pubPath, _ := auditKeyFiles(t, dir)
	addr, cfgPath := auditRunConfig(t, dir, dbPath, model.BaseURL(), fmt.Sprintf(`
events: {webhooks: [{url: %q, secret: webhook-secret-0123456789, events: [audit_checkpoint]}]}
audit:
  signing_key: ${file:%s}
  checkpoint_every: {rows: 1000, interval: 1h}
`, hook.URL, keyPath))
	ctx, cancel := context.WithCancel(context.Background())
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"run", "-config", cfgPath}, nil, &syncBuffer{}, &stderr) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			if code := <-done; code != 0 {
				t.Errorf("airlock run exited %d:\n%s", code, stderr.String())
			}
		}
	}
	t.Cleanup(stop)
	waitReady(t, addr)
	waitUntil(t, "the audit_checkpoint event", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) > 0
	})
	stop()
	var c storage.AuditCheckpoint
	mu.Lock()
	if err := json.Unmarshal(got[0], &c); err != nil {
		t.Fatal(err)
	}
	cpPath := filepath.Join(dir, "cp.json")
	if err := os.WriteFile(cpPath, got[0], 0o600); err != nil {
		t.Fatal(err)
	}
	mu.Unlock()
	if c.ID != headID || c.Hash != headHash {
		t.Fatalf("checkpoint %d %s, head %d %s", c.ID, c.Hash, headID, headHash)
	}
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"audit", "verify", "-config", cfgPath, "-checkpoint", cpPath, "-pubkey", pubPath}, nil, &out, &errOut)
	if code != 0 || !strings.Contains(out.String(), "stored checkpoints verified: 1") {
		t.Fatalf("verify: exit %d: %s%s", code, out.String(), errOut.String())
	}
	// Another key's public half: the stored checkpoint is named forged.
	_, otherPub, _ := auditKeyFiles(t, t.TempDir())
	out.Reset()
	errOut.Reset()
	code = run(context.Background(), []string{"audit", "verify", "-config", cfgPath, "-pubkey", otherPub}, nil, &out, &errOut)
	if code != 1 || !strings.Contains(errOut.String(), fmt.Sprintf("audit row %d forged", headID)) {
		t.Fatalf("verify with another key: exit %d: %s%s", code, out.String(), errOut.String())
	}
}

// TestRunPrunesAudit: `airlock run` with audit.retention runs
// audit-retention, which prunes the rows older than it behind a signed
// start checkpoint; `airlock audit verify -pubkey` then passes and says
// where the chain starts.
func TestRunPrunesAudit(t *testing.T) {
	model := modeltest.NewOpenAIServer(t, func(modeltest.OpenAIRequest) modeltest.OpenAIReply { return modeltest.TextReply("hi") })
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "airlock.db")
	at := time.Now().Add(-500 * 24 * time.Hour)
	db, err := storage.Open(context.Background(), "sqlite", dbPath, storage.WithClock(func() time.Time { return at }))
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for i := range 5 {
		if i == 3 {
			at = time.Now().Add(-24 * time.Hour)
		}
		if err := db.Audit(context.Background(), confirm.AuditEvent{Kind: confirm.AuditDecision, Tool: "deploy", Actor: fmt.Sprint("U", i)}); err != nil {
			t.Fatal(err)
		}
		id, _, _ := db.AuditHead(context.Background())
		ids = append(ids, id)
	}
	rows := func() int {
		n := 0
		if err := db.AuditRecords(context.Background(), 0, storage.AuditRecordFilter{}, func(storage.AuditRecord) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	defer db.Close()
	keyPath, pubPath, _ := auditKeyFiles(t, dir)
	addr, cfgPath := auditRunConfig(t, dir, dbPath, model.BaseURL(), fmt.Sprintf(`
audit:
  signing_key: ${file:%s}
  retention: 400d
`, keyPath))
	ctx, cancel := context.WithCancel(context.Background())
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"run", "-config", cfgPath}, nil, &syncBuffer{}, &stderr) }()
	waitReady(t, addr)
	waitUntil(t, "the rows older than 400 days to be pruned", func() bool { return rows() == 2 })
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("airlock run exited %d:\n%s", code, stderr.String())
	}
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"audit", "verify", "-config", cfgPath, "-pubkey", pubPath}, nil, &out, &errOut)
	if code != 0 || !strings.Contains(out.String(), "2 rows") ||
		!strings.Contains(out.String(), fmt.Sprintf("the chain starts after row %d: rows up to it were pruned", ids[2])) ||
		!strings.Contains(out.String(), "its signature checked") {
		t.Fatalf("verify after the prune: exit %d: %s%s", code, out.String(), errOut.String())
	}
}

// TestRunAlarmsOnForeignAuditHead: someone with the database appended a
// row with a correctly computed hash and moved the chain's head to it.
// `airlock run` with audit.signing_key does not sign it: its checkpoint
// job records the foreign head in the audit (chained around it), logs
// it, counts it in airlock_audit_foreign_heads_total and sends the
// audit_foreign_row webhook event; the checkpoint it signs is of its own
// row, and verify with the config's key names the forged row.
func TestRunAlarmsOnForeignAuditHead(t *testing.T) {
	var mu sync.Mutex
	var alarm map[string]any
	var cps []storage.AuditCheckpoint
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var ev map[string]any
		var cp struct {
			Checkpoint *storage.AuditCheckpoint `json:"checkpoint"`
		}
		if json.Unmarshal(b, &ev) == nil {
			mu.Lock()
			switch ev["type"] {
			case "audit_foreign_row":
				alarm = ev
			case "audit_checkpoint":
				if json.Unmarshal(b, &cp) == nil && cp.Checkpoint != nil {
					cps = append(cps, *cp.Checkpoint)
				}
			}
			mu.Unlock()
		}
	}))
	t.Cleanup(hook.Close)
	model := modeltest.NewOpenAIServer(t, func(modeltest.OpenAIRequest) modeltest.OpenAIReply { return modeltest.TextReply("hi") })
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "airlock.db")
	keyPath, _, key := auditKeyFiles(t, dir)
	ctx := context.Background()
	db, err := storage.Open(ctx, "sqlite", dbPath, storage.WithAuditKey(key))
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
	f := storage.AuditRecord{ID: headID + 1, At: time.Now().UTC().Truncate(time.Microsecond), Kind: "decision", Tool: "deploy", Actor: "U-mallory",
		Detail: `{"status":"allowed"}`, PrevHash: headHash}
	f.Hash = storage.AuditHash(f.PrevHash, f)
	raw, err := sql.Open("sqlite3", dbPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.ExecContext(ctx, `INSERT INTO audit (id, at, kind, conversation_id, batch_id, call_key, tool, actor, detail, prev_hash, hash)
		VALUES (?, ?, ?, 0, '', '', ?, ?, ?, ?, ?)`, f.ID, f.At.Format("2006-01-02T15:04:05.000000000Z07:00"), f.Kind, f.Tool, f.Actor, f.Detail, f.PrevHash, f.Hash); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.ExecContext(ctx, `UPDATE audit_head SET last_id = ?, last_hash = ?`, f.ID, f.Hash); err != nil {
		t.Fatal(err)
	}
	raw.Close()

	addr, cfgPath := auditRunConfig(t, dir, dbPath, model.BaseURL(), fmt.Sprintf(`
events: {webhooks: [{url: %q, secret: webhook-secret-0123456789, events: [audit_foreign_row, audit_checkpoint]}]}
audit:
  signing_key: ${file:%s}
  checkpoint_every: {rows: 1, interval: 1h}
`, hook.URL, keyPath))
	runCtx, cancel := context.WithCancel(ctx)
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() { done <- run(runCtx, []string{"run", "-config", cfgPath}, nil, &syncBuffer{}, &stderr) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	waitReady(t, addr)
	waitUntil(t, "the audit_foreign_row event and a checkpoint", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return alarm != nil && len(cps) > 0
	})
	mu.Lock()
	if alarm["audit_row"] != float64(f.ID) || alarm["actor"] != "airlock" {
		t.Errorf("event: %v, want audit_row %d", alarm, f.ID)
	}
	for _, c := range cps {
		if c.ID == f.ID || c.Hash == f.Hash {
			t.Errorf("a checkpoint of the forged row was sent: %+v", c)
		}
	}
	mu.Unlock()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "airlock_audit_foreign_heads_total 1") {
		t.Errorf("metrics lack airlock_audit_foreign_heads_total 1:\n%s", body)
	}
	if !strings.Contains(stderr.String(), "did not write") || !strings.Contains(stderr.String(), fmt.Sprintf("row=%d", f.ID)) {
		t.Errorf("no log line naming row %d:\n%s", f.ID, stderr.String())
	}
	var out, errOut bytes.Buffer
	if code := run(ctx, []string{"audit", "verify", "-config", cfgPath}, nil, &out, &errOut); code != 1 ||
		!strings.Contains(errOut.String(), fmt.Sprintf("audit row %d unauthenticated", f.ID)) {
		t.Errorf("verify: exit %d: %s%s", code, out.String(), errOut.String())
	}
}
