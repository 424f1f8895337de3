package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/model/modeltest"
	"github.com/airlockhq/airlock/storage"
)

// binaries builds the real airlock binary once per set of build tags.
var binaries sync.Map // tags -> *builtBinary

type builtBinary struct {
	once sync.Once
	path string
	err  error
}

// syncBuffer is a buffer safe for concurrent use, for a process's output
// (the audit job tests on another branch name it so too).
type syncBuffer = testkit.Buffer

// skipShort skips, under -short, a test that builds and runs the binary.
func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
}

func airlockBinary(t *testing.T, tags ...string) string {
	t.Helper()
	key := strings.Join(tags, ",")
	v, _ := binaries.LoadOrStore(key, &builtBinary{})
	b := v.(*builtBinary)
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "airlock-bin")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, "airlock")
		args := []string{"build", "-o", b.path}
		if key != "" {
			args = append(args, "-tags", key)
		}
		out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
		if err != nil {
			b.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// toolServer is a fake service the HTTP tools call; it records each hit.
type toolServer struct {
	*httptest.Server
	mu    sync.Mutex
	hits  []toolHit
	block chan struct{} // when set, deploy requests wait on it after being counted
}

type toolHit struct {
	Path, IdempotencyKey, Body, Auth string
}

func (ts *toolServer) lastAuth() string {
	hits := ts.calls()
	if len(hits) == 0 {
		return ""
	}
	return hits[len(hits)-1].Auth
}

func newToolServer(t *testing.T) *toolServer {
	ts := &toolServer{}
	ts.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ts.mu.Lock()
		ts.hits = append(ts.hits, toolHit{Path: r.URL.Path, IdempotencyKey: r.Header.Get("Idempotency-Key"), Body: string(body), Auth: r.Header.Get("Authorization")})
		block := ts.block
		ts.mu.Unlock()
		if block != nil && strings.HasPrefix(r.URL.Path, "/deploy/") {
			select {
			case <-block:
			case <-r.Context().Done():
				return
			}
		}
		fmt.Fprintf(w, `{"ok":true,"path":%q}`, r.URL.Path)
	}))
	t.Cleanup(ts.Close)
	return ts
}

// count is how many requests to path the service has had.
func (ts *toolServer) count(path string) int {
	return ts.countWhere(func(p string) bool { return p == path })
}

// countPrefix returns how many times the service saw a path starting
// with prefix.
func (ts *toolServer) countPrefix(prefix string) int {
	return ts.countWhere(func(p string) bool { return strings.HasPrefix(p, prefix) })
}

func (ts *toolServer) countWhere(match func(path string) bool) int {
	n := 0
	for _, h := range ts.calls() {
		if match(h.Path) {
			n++
		}
	}
	return n
}

func (ts *toolServer) calls() []toolHit {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return append([]toolHit(nil), ts.hits...)
}

// callingModel is a fake model that asks for calls and answers the last
// tool result it is sent with "model saw: <result>".
func callingModel(t *testing.T, calls ...modeltest.OpenAIToolCall) *modeltest.OpenAIServer {
	return modeltest.NewOpenAIServer(t, func(req modeltest.OpenAIRequest) modeltest.OpenAIReply {
		if last := req.Messages[len(req.Messages)-1]; last.Role == "tool" {
			return modeltest.TextReply("model saw: " + last.Content)
		}
		return modeltest.CallsReply(calls...)
	})
}

// agent answers like a model would, from the conversation it is sent.
func agent(req modeltest.OpenAIRequest) modeltest.OpenAIReply {
	last := req.Messages[len(req.Messages)-1]
	switch {
	case last.Role == "tool":
		var seen []string
		for i := len(req.Messages) - 1; i >= 0 && req.Messages[i].Role == "tool"; i-- {
			seen = append([]string{req.Messages[i].Content}, seen...)
		}
		return modeltest.TextReply("model saw: " + strings.Join(seen, " | "))
	case strings.Contains(last.Content, "deploy api"):
		return modeltest.CallsReply(
			modeltest.OpenAIToolCall{ID: "call_status", Name: "service_status", Arguments: `{"service": "api"}`},
			modeltest.OpenAIToolCall{ID: "call_deploy", Name: "deploy", Arguments: `{"service":"api","environment":"production"}`},
		)
	case strings.Contains(last.Content, "deploy web"):
		return modeltest.CallsReply(
			modeltest.OpenAIToolCall{ID: "call_web", Name: "deploy", Arguments: `{"service":"web","environment":"staging"}`},
		)
	}
	return modeltest.TextReply("hello")
}

const e2eConfig = `
storage:
  driver: sqlite
  dsn: %s
model:
  provider: openai
  name: fake-model
  api_key: ${AIRLOCK_E2E_MODEL_KEY:-sk-test}
  base_url: %s
confirmation:
  timeout: 1h
tools:
  - name: service_status
    description: Status of a service.
    parameters:
      type: object
      properties: {service: {type: string}}
      required: [service]
    summary: "Read the status of {{.service}}"
    http: {method: POST, url: "%s/status/{{.service}}"}
  - name: deploy
    description: Deploy a service.
    confirm: true
    parameters:
      type: object
      properties:
        service: {type: string}
        environment: {type: string, enum: [staging, production]}
      required: [service, environment]
    summary: "Deploy {{.service}} to {{.environment}}"
    http:
      method: POST
      url: "%s/deploy/{{.service}}"
      headers: {Authorization: "Bearer ${AIRLOCK_E2E_TOOL_TOKEN:-none}"}
`

// chatProcess is a running `airlock chat` driven through stdin/stdout.
type chatProcess struct {
	t     *testing.T
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *testkit.Buffer
	errb  *testkit.Buffer
	seen  int
}

func startChat(t *testing.T, cfgPath string) *chatProcess {
	t.Helper()
	return startChatWith(t, airlockBinary(t), cfgPath)
}

func startChatWith(t *testing.T, bin, cfgPath string, env ...string) *chatProcess {
	t.Helper()
	cmd := exec.Command(bin, "chat", "-config", cfgPath)
	cmd.Env = append(os.Environ(), env...)
	return startChatCmd(t, cmd)
}

// startChatCmd starts cmd, an `airlock chat`, with pipes to talk to it,
// kills it when the test ends, and waits for its greeting.
func startChatCmd(t *testing.T, cmd *exec.Cmd) *chatProcess {
	t.Helper()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &chatProcess{t: t, cmd: cmd, stdin: stdin, out: &testkit.Buffer{}, errb: &testkit.Buffer{}}
	cmd.Stdout, cmd.Stderr = p.out, p.errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	p.waitFor("/help lists the commands")
	return p
}

func (p *chatProcess) send(line string) {
	p.t.Helper()
	if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
		p.t.Fatal(err)
	}
}

// waitFor waits until s appears in output not yet consumed, and returns
// the output up to and including it. (A generous deadline: the binary
// starts on a machine that may be busy building other tests.)
func (p *chatProcess) waitFor(s string) string {
	p.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		all := p.out.String()
		if i := strings.Index(all[p.seen:], s); i >= 0 {
			chunk := all[p.seen : p.seen+i+len(s)]
			p.seen += i + len(s)
			return chunk
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.t.Fatalf("timed out waiting for %q\nstdout:\n%s\nstderr:\n%s", s, p.out.String()[p.seen:], p.errb.String())
	return ""
}

// startRun starts `airlock run` with the config at path; its output is
// logged when the test fails, and it is killed at cleanup.
func startRun(t *testing.T, path string, env ...string) (*exec.Cmd, *testkit.Buffer) {
	t.Helper()
	cmd := exec.Command(airlockBinary(t), "run", "-config", path)
	cmd.Env = append(os.Environ(), env...)
	logs := &testkit.Buffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%s logs:\n%s", filepath.Base(path), logs.String())
		}
	})
	return cmd, logs
}

// waitReady waits until the process listening on addr answers /readyz.
func waitReady(t *testing.T, addr string) {
	t.Helper()
	waitUntil(t, "ready", func() bool {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
}

// kill ends the process with SIGKILL: no cleanup runs.
func (p *chatProcess) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	_ = p.cmd.Wait()
}

// TestEndToEndShell drives the real binary's terminal adapter against a fake
// OpenAI-compatible model server, a fake tool service and a real SQLite file.
func TestEndToEndShell(t *testing.T) {
	skipShort(t)
	model := modeltest.NewOpenAIServer(t, agent)
	tools := newToolServer(t)
	const modelKey, toolToken = "sk-live-MODELSECRET123", "tok-TOOLSECRET456"
	t.Setenv("AIRLOCK_E2E_MODEL_KEY", modelKey)
	t.Setenv("AIRLOCK_E2E_TOOL_TOKEN", toolToken)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "airlock.yaml")
	cfg := fmt.Sprintf(e2eConfig, filepath.Join(dir, "airlock.db"), model.BaseURL(), tools.URL, tools.URL)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}

	// 1. A reply with one ungated and one gated call pauses: nothing runs.
	p := startChat(t, cfgPath)
	p.send("please deploy api")
	card := p.waitFor("/allow N")
	for _, want := range []string{"APPROVAL NEEDED", "[1] service_status: Read the status of api", "[2] deploy: Deploy api to production", "runs with the batch", "waiting for a decision"} {
		if !strings.Contains(card, want) {
			t.Fatalf("card lacks %q:\n%s", want, card)
		}
	}
	if hits := tools.calls(); len(hits) != 0 {
		t.Fatalf("tools ran before any decision: %+v", hits)
	}

	// 2. Kill the process between pause and decision; reopen on the same file.
	p.kill()
	p = startChat(t, cfgPath)
	// The card prints again: as still waiting, or, when the kill came
	// before its card was recorded, posted anew at start.
	if again := p.waitFor("/allow N"); !strings.Contains(again, "APPROVAL NEEDED") || !strings.Contains(again, "Deploy api to production") {
		t.Fatalf("the waiting card did not come back after the restart:\n%s", again)
	}

	// 3. Allow: both calls run, in the model's order, once each.
	p.send("/allow 2")
	p.waitFor("model saw:")
	line := p.waitFor("\n")
	hits := tools.calls()
	if len(hits) != 2 || hits[0].Path != "/status/api" || hits[1].Path != "/deploy/api" {
		t.Fatalf("tool calls: %+v", hits)
	}
	if hits[1].Body != `{"service":"api","environment":"production"}` || !strings.HasSuffix(hits[1].IdempotencyKey, "/call_deploy") {
		t.Fatalf("deploy call: %+v", hits[1])
	}
	if !strings.Contains(line, `"path":"/status/api"`) || !strings.Contains(line, `"path":"/deploy/api"`) ||
		strings.Index(line, "/status/api") > strings.Index(line, "/deploy/api") {
		t.Fatalf("results did not reach the model in order: %q", line)
	}

	// 4. A second decision on the same call changes nothing.
	p.send("/allow 2")
	if out := p.waitFor("No card is waiting."); strings.Contains(out, "model saw") {
		t.Fatalf("second decision did something: %s", out)
	}
	if n := len(tools.calls()); n != 2 {
		t.Fatalf("a second decision ran tools again: %d calls", n)
	}

	// 5. Deny with a reason: the reason reaches the model; nothing runs.
	p.send("deploy web please")
	p.waitFor("/allow N")
	p.waitFor("\n> ")
	p.send("/deny 1 change freeze until Monday")
	denied := p.waitFor("model saw:")
	denied += p.waitFor("\n")
	// The local user asked and denied as the approver they also are: the
	// terminal shows it denied by them (issue 34: not "withdrawn").
	if !strings.Contains(denied, "denied by local") || strings.Contains(denied, "withdrawn") || !strings.Contains(denied, "change freeze until Monday") {
		t.Fatalf("deny output:\n%s", denied)
	}
	if n := len(tools.calls()); n != 2 {
		t.Fatalf("a denied call ran: %d calls", n)
	}
	reqs := model.Requests()
	last := reqs[len(reqs)-1].Messages
	toolMsg := last[len(last)-1]
	if toolMsg.Role != "tool" || toolMsg.ToolCallID != "call_web" || !strings.Contains(toolMsg.Content, "change freeze until Monday") {
		t.Fatalf("model got %+v", toolMsg)
	}

	t.Logf("transcript:\n%s", p.out.String())
	// The audit holds the story.
	p.send("/quit")
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("/quit: %v\n%s", err, p.errb.String())
	}
	db, err := storage.Open(context.Background(), "sqlite", filepath.Join(dir, "airlock.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	events, err := db.AuditEvents(context.Background(), confirm.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	count := map[confirm.AuditKind]int{}
	for _, e := range events {
		count[e.Kind]++
	}
	// 3 calls asked for; 2 approval requests; 2 decisions by a person; 2 runs.
	want := map[confirm.AuditKind]int{confirm.AuditToolCall: 3, confirm.AuditApprovalRequest: 2, confirm.AuditDecision: 2, confirm.AuditToolResult: 2}
	for k, n := range want {
		if count[k] != n {
			t.Errorf("audit %s: %d events, want %d (all: %v)", k, count[k], n, count)
		}
	}

	// airlock audit tells who asked, the exact arguments, who decided, when
	// and the outcome of every call.
	out, err := exec.Command(airlockBinary(t), "audit", "-config", cfgPath, "-json").CombinedOutput()
	if err != nil {
		t.Fatalf("audit: %v\n%s", err, out)
	}
	var records []struct {
		Tool        string          `json:"tool"`
		AskedBy     string          `json:"asked_by"`
		Decision    string          `json:"decision"`
		DecidedBy   string          `json:"decided_by"`
		DecidedAt   *time.Time      `json:"decided_at"`
		Outcome     string          `json:"outcome"`
		DenyMessage string          `json:"deny_message"`
		Args        json.RawMessage `json:"args"`
	}
	if err := json.Unmarshal(out, &records); err != nil {
		t.Fatalf("audit -json: %v\n%s", err, out)
	}
	if len(records) != 3 {
		t.Fatalf("audit records: %d\n%s", len(records), out)
	}
	r := records[1]
	if r.Tool != "deploy" || r.AskedBy != "local" || r.Decision != "allowed" || r.DecidedBy != "local" || r.DecidedAt == nil ||
		r.Outcome != "succeeded" || string(r.Args) != `{"service":"api","environment":"production"}` {
		t.Fatalf("deploy record: %+v\n%s", r, out)
	}
	if r := records[2]; r.Decision != "denied" || r.Outcome != "not run" || !strings.Contains(r.DenyMessage, "change freeze") {
		t.Fatalf("denied record: %+v", r)
	}
	text, err := exec.Command(airlockBinary(t), "audit", "-config", cfgPath, "-since", "1h").CombinedOutput()
	if err != nil || !strings.Contains(string(text), "DECIDED BY") || strings.Count(string(text), "deploy") < 2 {
		t.Fatalf("audit text: %v\n%s", err, text)
	}

	// The secrets reached the services they are for, and nowhere else:
	// not the logs, the terminal, the audit, or the database file.
	if reqs[0].APIKey != modelKey || !strings.Contains(tools.lastAuth(), toolToken) {
		t.Fatalf("secrets did not reach their services: %q %q", reqs[0].APIKey, tools.lastAuth())
	}
	dbBytes, _ := os.ReadFile(filepath.Join(dir, "airlock.db"))
	wal, _ := os.ReadFile(filepath.Join(dir, "airlock.db-wal"))
	logged, _ := os.ReadFile(filepath.Join(filepath.Dir(cfgPath), chatLogName))
	for name, data := range map[string]string{
		"stderr": p.errb.String(), "log file": string(logged), "stdout": p.out.String(), "audit -json": string(out), "audit": string(text),
		"database": string(dbBytes) + string(wal),
	} {
		for _, secret := range []string{modelKey, toolToken} {
			if strings.Contains(data, secret) {
				t.Errorf("a secret appears in %s", name)
			}
		}
	}
}

// TestExpiryInRealTime: with a short timeout, the real binary reminds the
// approvers, then expires the call and continues, with nobody typing.
func TestExpiryInRealTime(t *testing.T) {
	skipShort(t)
	model := modeltest.NewOpenAIServer(t, agent)
	tools := newToolServer(t)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "airlock.yaml")
	cfg := fmt.Sprintf(e2eConfig, filepath.Join(dir, "airlock.db"), model.BaseURL(), tools.URL, tools.URL)
	cfg = strings.Replace(cfg, "timeout: 1h", "timeout: 3s\n  remind_before: 2s", 1)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startChat(t, cfgPath)
	p.send("deploy web")
	p.waitFor("/allow N")
	paused := time.Now()
	reminder := p.waitFor("still needs a decision")
	if !strings.Contains(reminder, "local") {
		t.Fatalf("the reminder does not mention the approver: %q", reminder)
	}
	expired := p.waitFor("model saw:") + p.waitFor("\n")
	lag := time.Since(paused) - 3*time.Second
	t.Logf("expiry acted on %v after the deadline (the sweep runs every second)", lag.Round(10*time.Millisecond))
	if !strings.Contains(expired, "expired") || !strings.Contains(expired, "Approval expired: nobody decided in time") {
		t.Fatalf("expiry output:\n%s", expired)
	}
	if n := len(tools.calls()); n != 0 {
		t.Fatalf("an expired call ran: %d", n)
	}
	p.send("/allow 1")
	p.waitFor("No card is waiting.")
}

// writeConfig writes cfg as dir/airlock.yaml, readable by its owner only,
// and returns its path.
func writeConfig(t *testing.T, dir, cfg string) string {
	t.Helper()
	path := filepath.Join(dir, "airlock.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
