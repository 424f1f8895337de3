package mcptools

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/tools"
)

func memConfig(name string) Config {
	return Config{Name: name, Command: []string{"in-memory"}}
}

func TestDestructiveToolIsGatedAndRunsOnceWithTheKey(t *testing.T) {
	rec := &recorder{}
	set := &tools.Set{}
	cfg := memConfig("mem")
	cfg.Summaries = map[string]string{"delete_item": "Delete item {{.id}}"}
	startManager(t, []Config{cfg}, set, nil, memDial(newTestServer(rec, nil)))

	del := mustTool(t, set, "mem__delete_item")
	if !del.Confirm() {
		t.Fatal("delete_item: Confirm() = false, want true")
	}
	spec := del.Spec()
	if spec.Name != "mem__delete_item" || !strings.HasPrefix(spec.Description, "[mem] Deletes an item") {
		t.Fatalf("spec = %q / %q", spec.Name, spec.Description)
	}
	var schema map[string]any
	if err := json.Unmarshal(spec.Parameters, &schema); err != nil || schema["properties"] == nil {
		t.Fatalf("parameters = %s (%v)", spec.Parameters, err)
	}
	args := json.RawMessage(`{"id":"42"}`)
	if err := del.Validate(args); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if got, err := del.Summary(args); err != nil || got != "Delete item 42" {
		t.Fatalf("Summary = %q, %v", got, err)
	}
	out, err := del.Run(context.Background(), args, "batch7/call_1")
	if err != nil || out != "deleted 42" {
		t.Fatalf("Run = %q, %v", out, err)
	}
	calls := rec.of("delete_item")
	if len(calls) != 1 {
		t.Fatalf("server got %d calls, want 1", len(calls))
	}
	if key := calls[0].Meta[IdempotencyMetaKey]; key != "batch7/call_1" {
		t.Fatalf("_meta[%s] = %v; meta %v", IdempotencyMetaKey, key, calls[0].Meta)
	}
	if string(calls[0].Args) != `{"id":"42"}` {
		t.Fatalf("arguments = %s", calls[0].Args)
	}
}

func TestReadOnlyHintUngatedOnlyWithTrustAnnotations(t *testing.T) {
	srv := newTestServer(&recorder{}, nil)
	plain, trusting, off := memConfig("plain"), memConfig("trusting"), memConfig("off")
	trusting.TrustAnnotations = true
	off.Confirm = ptr(false)
	set := &tools.Set{}
	m := startManager(t, []Config{plain, trusting, off}, set, nil, memDial(srv))

	cases := []struct {
		name string
		want bool
	}{
		{"plain__get_item", true}, // annotations are untrusted by default
		{"plain__delete_item", true},
		{"trusting__get_item", false},
		{"trusting__delete_item", true},
		{"off__delete_item", false},
	}
	for _, c := range cases {
		if got := mustTool(t, set, c.name).Confirm(); got != c.want {
			t.Errorf("%s: Confirm() = %v, want %v", c.name, got, c.want)
		}
	}
	// The default summary uses the title.
	if got, _ := mustTool(t, set, "plain__get_item").Summary(json.RawMessage(`{"id":"x"}`)); got != `Get item(id="x")` {
		t.Errorf("default summary = %q", got)
	}
	infos := map[string]Info{}
	for _, in := range m.Tools() {
		infos[in.Name] = in
	}
	gi := infos["trusting__get_item"]
	if gi.Server != "trusting" || gi.Tool != "get_item" || gi.Title != "Get item" || !gi.ReadOnlyHint || gi.DestructiveHint || gi.Gated || gi.Why == "" {
		t.Errorf("info = %+v", gi)
	}
	if d := infos["plain__delete_item"]; !d.DestructiveHint || !d.Gated || d.ReadOnlyHint {
		t.Errorf("info = %+v", d)
	}
}

func TestInvalidArgumentsNeverReachTheServer(t *testing.T) {
	rec := &recorder{}
	set := &tools.Set{}
	startManager(t, []Config{memConfig("mem")}, set, nil, memDial(newTestServer(rec, nil)))
	del := mustTool(t, set, "mem__delete_item")
	for _, args := range []string{`{"id":5}`, `{}`, `{"id":"a","id":"b"}`, "{\"id\":\"\xff\"}", `[1]`, `{"id":"a"} {}`} {
		if err := del.Validate(json.RawMessage(args)); !errors.Is(err, tools.ErrInvalidArgs) {
			t.Errorf("Validate(%s) = %v, want ErrInvalidArgs", args, err)
		}
		if _, err := del.Run(context.Background(), json.RawMessage(args), "b/1"); !errors.Is(err, tools.ErrInvalidArgs) {
			t.Errorf("Run(%s) = %v, want ErrInvalidArgs", args, err)
		}
	}
	if n := len(rec.of("delete_item")); n != 0 {
		t.Fatalf("server got %d calls, want 0", n)
	}
}

func TestResults(t *testing.T) {
	set := &tools.Set{}
	startManager(t, []Config{memConfig("mem")}, set, nil, memDial(newTestServer(&recorder{}, nil)))
	ctx := context.Background()

	out, err := mustTool(t, set, "mem__mixed").Run(ctx, nil, "b/1")
	want := "first\n[image: image/png, 4 bytes]\nsecond\n" + `{"label":"two","n":2}`
	if err != nil || out != want {
		t.Errorf("mixed = %q, %v; want %q", out, err, want)
	}
	// Structured content the server also gave as text is not repeated.
	out, err = mustTool(t, set, "mem__count").Run(ctx, json.RawMessage(`{}`), "b/2")
	if err != nil || strings.Count(out, `"three"`) != 1 {
		t.Errorf("count = %q, %v", out, err)
	}
	// isError: a plain failure with the server's text.
	_, err = mustTool(t, set, "mem__fail").Run(ctx, nil, "b/3")
	var te *ToolError
	if !errors.As(err, &te) || errors.Is(err, tools.ErrOutcomeUnknown) || !strings.Contains(err.Error(), "quota exceeded for project p1") {
		t.Errorf("fail = %v", err)
	}
}

func TestTimeoutIsOutcomeUnknown(t *testing.T) {
	set := &tools.Set{}
	cfg := memConfig("mem")
	cfg.Timeout = 200 * time.Millisecond
	startManager(t, []Config{cfg}, set, nil, memDial(newTestServer(&recorder{}, nil)))
	_, err := mustTool(t, set, "mem__block").Run(context.Background(), nil, "b/1")
	if !errors.Is(err, tools.ErrOutcomeUnknown) || !strings.Contains(err.Error(), "no answer within 200ms") {
		t.Fatalf("Run = %v, want ErrOutcomeUnknown after the timeout", err)
	}
}

func TestListChangedUpdatesTheSet(t *testing.T) {
	srv := newTestServer(&recorder{}, nil)
	set := &tools.Set{}
	startManager(t, []Config{memConfig("mem")}, set, nil, memDial(srv))
	mustTool(t, set, "mem__get_item")

	mcp.AddTool(srv, &mcp.Tool{Name: "added", Description: "Added at run time."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "new"}}}, nil, nil
		})
	testkit.Eventually(t, 10*time.Second, "mem__added in the set", func() bool { return set.Has("mem__added") })
	if out, err := mustTool(t, set, "mem__added").Run(context.Background(), nil, "b/1"); err != nil || out != "new" {
		t.Fatalf("added = %q, %v", out, err)
	}

	stale := mustTool(t, set, "mem__get_item")
	srv.RemoveTools("get_item")
	testkit.Eventually(t, 10*time.Second, "mem__get_item gone", func() bool { return !set.Has("mem__get_item") })
	// A call of a tool the server no longer has: the server says so, a
	// plain failure.
	_, err := stale.Run(context.Background(), json.RawMessage(`{"id":"1"}`), "b/2")
	if err == nil || errors.Is(err, tools.ErrOutcomeUnknown) {
		t.Fatalf("stale tool: %v, want a plain error", err)
	}
	t.Logf("stale tool: %v", err)
}

func TestStderrLines(t *testing.T) {
	log, logs := newLog()
	l := &lineLogger{log: log}
	l.Write([]byte("one\r\ntw"))
	l.Write([]byte("o\n" + strings.Repeat("x", 3*maxStderrLine) + "\nlast"))
	l.flush()
	s := logs.String()
	testkit.ContainsAll(t, "log", s, "line=one\n", "line=two\n", " [cut]", "line=last\n")
	if strings.Count(s, "x") > maxStderrLine+10 {
		t.Errorf("long line not cut")
	}
}

func TestConfiguredSubsetOnly(t *testing.T) {
	set := &tools.Set{}
	cfg := memConfig("mem")
	cfg.Tools = []string{"get_item", "not_offered"}
	log, logs := newLog()
	startManager(t, []Config{cfg}, set, log, memDial(newTestServer(&recorder{}, nil)))
	if got := set.Names(); !slices.Equal(got, []string{"mem__get_item"}) {
		t.Fatalf("names = %v", got)
	}
	if !strings.Contains(logs.String(), "not_offered") {
		t.Errorf("log lacks the missing configured tool:\n%s", logs)
	}
}

func TestReconnectsAfterTheConnectionDrops(t *testing.T) {
	srv := newTestServer(&recorder{}, nil)
	var mu sync.Mutex
	var sessions []*mcp.ServerSession
	set := &tools.Set{}
	log, logs := newLog()
	m := startManager(t, []Config{memConfig("mem")}, set, log, func(cfg Config, _ *slog.Logger) (mcp.Transport, error) {
		ct, st := mcp.NewInMemoryTransports()
		ss, err := srv.Connect(context.Background(), st, nil)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		sessions = append(sessions, ss)
		mu.Unlock()
		return ct, nil
	})
	mu.Lock()
	first := sessions[0]
	mu.Unlock()
	_ = first.Close()
	testkit.Eventually(t, 10*time.Second, "a second connection", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(sessions) >= 2 && m.Status()[0].Connected
	})
	if !strings.Contains(logs.String(), "connection lost") {
		t.Errorf("log lacks the drop:\n%s", logs)
	}
	// The tools stayed in the set and work on the new connection.
	if out, err := mustTool(t, set, "mem__get_item").Run(context.Background(), json.RawMessage(`{"id":"1"}`), "b/1"); err != nil || out != "item 1" {
		t.Fatalf("after reconnect: %q, %v", out, err)
	}
}

// testExe is the test binary, which serves MCP over stdio when serverEnv is
// set (TestMain).
func testExe(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

func stdioConfig(t *testing.T, name string) Config {
	return Config{
		Name:    name,
		Command: []string{testExe(t)},
		Env:     map[string]string{serverEnv: "1", "AIRLOCK_MCPTEST_CONFIGURED": "configured-value"},
	}
}

func TestStdioEnvIsolationAndStderr(t *testing.T) {
	t.Setenv("AIRLOCK_MCPTEST_PARENT_SECRET", "parent-secret")
	set := &tools.Set{}
	log, logs := newLog()
	startManager(t, []Config{stdioConfig(t, "child")}, set, log, nil)
	env := mustTool(t, set, "child__env")
	ctx := context.Background()
	for name, want := range map[string]string{
		"AIRLOCK_MCPTEST_PARENT_SECRET": "<unset>",
		"AIRLOCK_MCPTEST_CONFIGURED":    "configured-value",
		"PATH":                          os.Getenv("PATH"),
	} {
		out, err := env.Run(ctx, json.RawMessage(`{"name":"`+name+`"}`), "b/"+name)
		if err != nil || out != want {
			t.Errorf("child's %s = %q, %v; want %q", name, out, err, want)
		}
	}
	if _, err := mustTool(t, set, "child__say").Run(ctx, json.RawMessage(`{"text":"hello from the child"}`), "b/say"); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the stderr line in the log", func() bool {
		s := logs.String()
		for _, line := range strings.Split(s, "\n") {
			if strings.Contains(line, "server=child") && strings.Contains(line, "hello from the child") {
				return true
			}
		}
		return false
	})
}

func TestStdioServerKilledMidCall(t *testing.T) {
	set := &tools.Set{}
	log, logs := newLog()
	startManager(t, []Config{stdioConfig(t, "child")}, set, log, nil)
	pidOut, err := mustTool(t, set, "child__pid").Run(context.Background(), nil, "b/pid")
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(pidOut)
	if err != nil {
		t.Fatalf("pid %q: %v", pidOut, err)
	}
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := mustTool(t, set, "child__block").Run(context.Background(), nil, "b/block")
		done <- result{out, err}
	}()
	testkit.Eventually(t, 10*time.Second, "the block tool to start", func() bool { return strings.Contains(logs.String(), "block: started") })
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill %d: %v", pid, err)
	}
	select {
	case r := <-done:
		if !errors.Is(r.err, tools.ErrOutcomeUnknown) {
			t.Fatalf("Run = %q, %v; want ErrOutcomeUnknown", r.out, r.err)
		}
		t.Logf("Run: %v", r.err)
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return after the server was killed")
	}
}

func TestHTTPServer(t *testing.T) {
	rec := &recorder{}
	h := newHooks()
	srv := newTestServer(rec, h)
	var authMu sync.Mutex
	var auths []string
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		authMu.Lock()
		auths = append(auths, r.Header.Get("Authorization"))
		authMu.Unlock()
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)

	set := &tools.Set{}
	cfg := Config{Name: "web", URL: ts.URL, Headers: map[string]string{"Authorization": "Bearer t0ken"}}
	startManager(t, []Config{cfg}, set, nil, nil)
	t.Cleanup(func() { close(h.release) }) // before Close: the server's handler returns

	del := mustTool(t, set, "web__delete_item")
	if out, err := del.Run(context.Background(), json.RawMessage(`{"id":"9"}`), "b/http"); err != nil || out != "deleted 9" {
		t.Fatalf("Run = %q, %v", out, err)
	}
	if c := rec.of("delete_item"); len(c) != 1 || c[0].Meta[IdempotencyMetaKey] != "b/http" {
		t.Fatalf("calls = %+v", c)
	}
	authMu.Lock()
	for _, a := range auths {
		if a != "Bearer t0ken" {
			t.Errorf("a request had Authorization %q", a)
		}
	}
	authMu.Unlock()

	// The server's connections close while the tool runs.
	done := make(chan error, 1)
	go func() {
		_, err := mustTool(t, set, "web__block").Run(context.Background(), nil, "b/block")
		done <- err
	}()
	select {
	case <-h.started:
	case <-time.After(10 * time.Second):
		t.Fatal("block tool never started")
	}
	ts.CloseClientConnections()
	select {
	case err := <-done:
		if !errors.Is(err, tools.ErrOutcomeUnknown) {
			t.Fatalf("Run = %v; want ErrOutcomeUnknown", err)
		}
		t.Logf("Run: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after the connection dropped")
	}
}

func TestServerDownAtStartLeavesTheOthers(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedURL := "http://" + l.Addr().String() + "/mcp"
	l.Close()

	srv := newTestServer(&recorder{}, nil)
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)

	set := &tools.Set{}
	log, logs := newLog()
	start := time.Now()
	m := startManager(t, []Config{
		{Name: "closed", URL: closedURL},
		{Name: "missing", Command: []string{"/nonexistent/airlock-mcp-server"}},
		{Name: "up", URL: ts.URL},
		stdioConfig(t, "child"),
	}, set, log, nil)
	if !m.Ready() || time.Since(start) > 10*time.Second {
		t.Fatalf("ready after %s", time.Since(start))
	}
	if !set.Has("up__get_item") || !set.Has("child__get_item") {
		t.Fatalf("names = %v", set.Names())
	}
	for _, n := range set.Names() {
		if strings.HasPrefix(n, "closed__") || strings.HasPrefix(n, "missing__") {
			t.Fatalf("tool of a failed server in the set: %s", n)
		}
	}
	s := logs.String()
	for _, name := range []string{"server=closed", "server=missing"} {
		if !strings.Contains(s, name) || !strings.Contains(s, "mcp server failed") {
			t.Errorf("log lacks the failure of %s:\n%s", name, s)
		}
	}
	for _, st := range m.Status() {
		switch st.Name {
		case "closed", "missing":
			if st.Connected || st.Err == nil {
				t.Errorf("status %+v", st)
			}
		default:
			if !st.Connected || st.Tools == 0 {
				t.Errorf("status %+v", st)
			}
		}
	}
}

func TestCloseStopsTheServers(t *testing.T) {
	set := &tools.Set{}
	m := start(context.Background(), []Config{stdioConfig(t, "child")}, set, nil, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := m.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	tool := mustTool(t, set, "child__get_item")
	m.Close()
	if len(set.Names()) != 0 {
		t.Fatalf("names after Close = %v", set.Names())
	}
	if _, err := tool.Run(context.Background(), json.RawMessage(`{"id":"1"}`), "b/1"); err == nil || errors.Is(err, tools.ErrOutcomeUnknown) {
		t.Fatalf("Run after Close = %v, want a plain error", err)
	}
}

func TestReadyAfterAWhileWhenAServerHangs(t *testing.T) {
	defer func(d time.Duration) { readyAfter = d }(readyAfter)
	readyAfter = 300 * time.Millisecond
	set := &tools.Set{}
	cfg := stdioConfig(t, "hangs")
	cfg.Env[serverEnv] = "hang" // never answers initialize
	start := time.Now()
	m := startManager(t, []Config{cfg, memConfig("mem")}, set, nil, func(c Config, _ *slog.Logger) (mcp.Transport, error) {
		if c.Name == "mem" {
			return memDial(newTestServer(&recorder{}, nil))(c, nil)
		}
		return nil, nil // the real stdio transport
	})
	if d := time.Since(start); d < readyAfter || d > 5*time.Second {
		t.Fatalf("ready after %s", d)
	}
	if !m.Ready() || !set.Has("mem__get_item") {
		t.Fatalf("ready %v, names %v", m.Ready(), set.Names())
	}
}

// A server whose summary does not compile is not started, as one that
// fails Validate: its tools never run with the default read-back instead
// of the one the operator wrote.
func TestServerWithABadSummaryIsNotStarted(t *testing.T) {
	srv := newTestServer(&recorder{}, nil)
	bad, good := memConfig("bad"), memConfig("good")
	bad.Summaries = map[string]string{"delete_item": "Delete {{.id"}
	set := &tools.Set{}
	log, logs := newLog()
	startManager(t, []Config{bad, good}, set, log, memDial(srv))
	if !set.Has("good__delete_item") {
		t.Fatalf("names = %v", set.Names())
	}
	for _, n := range set.Names() {
		if strings.HasPrefix(n, "bad__") {
			t.Fatalf("tool of the server with a bad summary in the set: %s", n)
		}
	}
	if s := logs.String(); !strings.Contains(s, "mcp server not started") || !strings.Contains(s, "mcp_servers[0].summaries.delete_item") {
		t.Fatalf("log lacks the refusal:\n%s", s)
	}
}
