package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// bearer adds a client's token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// mcpConnect connects the Go MCP SDK's client to Airlock's MCP endpoint
// with the token.
func mcpConnect(t *testing.T, endpoint, token string) (*mcp.ClientSession, error) {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	tr := &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}}}
	cs, err := client.Connect(t.Context(), tr, nil)
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

// text is a tool result's text.
func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// TestMCPServerOverSlack drives Airlock's MCP endpoint of a real `airlock
// run` (Slack, SQLite) with the Go MCP SDK's client: it lists exactly the
// client's tools; an ungated call runs; a gated call waits in tools/call
// until the card's Allow, then returns the tool's result, the tool having
// run once; a deny returns the deny message; a call still waiting at the
// hold says so, its identical retry after Allow runs it once, and a
// further retry returns the stored result without running it again; a
// wrong token is refused with 401.
// mcpRig starts `airlock run` (Slack HTTP mode, SQLite) serving MCP at
// /mcp with a hold of 3 s to bob-cursor (gwBobToken), offered
// service_status (ungated) and deploy (gated), and not other_tool.
func mcpRig(t *testing.T) (*slackAPI, *toolServer, string) {
	t.Helper()
	api := newSlackAPI(t)
	model := callingModel(t)
	tools := newToolServer(t)
	dir := t.TempDir()
	addr := freeAddr(t)
	path := writeConfig(t, dir, fmt.Sprintf(`
%s
channels: [{platform: slack, id: COPS, approvers: [UALICE]}]
tools:
  - name: service_status
    parameters: {type: object, properties: {service: {type: string}}, required: [service]}
    http: {method: POST, url: "%s/status/{{.service}}"}
%s
  - name: other_tool
    parameters: {type: object, properties: {}}
    http: {method: POST, url: "%s/other"}
gateway:
  mcp: {path: /mcp, hold: 3s}
  clients:
    - {name: bob-cursor, token: %q, acts_for: UBOB, channel: {platform: slack, id: COPS}, tools: ["service_*", "deploy"], max_pending: 1}
`, slackRunHead(addr, "sqlite", dir+"/airlock.db", model.BaseURL(), api.URL+"/api/"), tools.URL,
		deployToolYAML(tools.URL, "service"), tools.URL, gwBobToken))
	startRun(t, path)
	waitReady(t, addr)
	return api, tools, addr
}

func TestMCPServerOverSlack(t *testing.T) {
	skipShort(t)
	api, tools, addr := mcpRig(t)
	endpoint := "http://" + addr + "/mcp"
	press := func(actionID, value string) {
		t.Helper()
		if code, err := postSigned(addr, actionBody("UALICE", actionID, value), "application/x-www-form-urlencoded"); err != nil || code != 200 {
			t.Fatalf("click: %d %v", code, err)
		}
	}
	seen := 0
	newCard := func(actionID string) string {
		t.Helper()
		waitUntil(t, "a new card", func() bool { return len(api.buttons(slackAllow)) > seen })
		seen = len(api.buttons(slackAllow))
		vs := api.buttons(actionID)
		return vs[len(vs)-1]
	}

	// A wrong token: 401 with WWW-Authenticate, before any MCP.
	req, _ := http.NewRequest("POST", endpoint, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
	req.Header.Set("Authorization", "Bearer "+strings.Repeat("x", 40))
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 401 || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
		t.Fatalf("a wrong token: %v %v", resp, err)
	}
	if _, err := mcpConnect(t, endpoint, strings.Repeat("x", 40)); err == nil {
		t.Fatal("the SDK connected with a wrong token")
	}

	cs, err := mcpConnect(t, endpoint, gwBobToken)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range list.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"deploy", "service_status"}) {
		t.Fatalf("tools listed: %v", names)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "other_tool", Arguments: map[string]any{}}); err == nil {
		t.Fatal("a tool the client is not offered was called")
	}

	// Ungated: runs at once.
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "service_status", Arguments: map[string]any{"service": "api"}})
	if err != nil || res.IsError || !strings.Contains(text(res), "/status/api") || tools.count("/status/api") != 1 {
		t.Fatalf("ungated call: %v %v (%d runs)", text(res), err, tools.count("/status/api"))
	}

	// Gated: waits inside tools/call until the card's Allow.
	type called struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan called, 1)
	go func() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "deploy", Arguments: map[string]any{"service": "api"}})
		done <- called{res, err}
	}()
	press(slackAllow, newCard(slackAllow))
	c := <-done
	if c.err != nil || c.res.IsError || !strings.Contains(text(c.res), "/deploy/api") || tools.count("/deploy/api") != 1 {
		t.Fatalf("gated call after Allow: %v %v (%d runs)", c.res, c.err, tools.count("/deploy/api"))
	}

	// Denied: the deny message, nothing ran.
	go func() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "deploy", Arguments: map[string]any{"service": "db <!channel> <@UALICE>"}})
		done <- called{res, err}
	}()
	deny := newCard("airlock_deny")
	if posts := api.posts(); pings(t, posts[len(posts)-1].Get("blocks"), "db <") {
		t.Fatalf("the client's arguments ping on the card: %s", posts[len(posts)-1].Get("blocks"))
	} else if all, _ := formatted(t, posts[len(posts)-1].Get("blocks")); !strings.Contains(all, "<!channel>") {
		t.Fatalf("the client's arguments are not on the card as sent: %s", all)
	}
	press("airlock_deny", deny)
	c = <-done
	if c.err != nil || !c.res.IsError || !strings.Contains(strings.ToLower(text(c.res)), "denied") || tools.countPrefix("/deploy/db") != 0 {
		t.Fatalf("denied call: %q %v", text(c.res), c.err)
	}

	// Still waiting at the hold (3 s): says so; the retry after Allow
	// runs it once; a further retry returns the stored result.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "deploy", Arguments: map[string]any{"service": "web"}})
	if err != nil || !res.IsError || !strings.Contains(text(res), "Waiting for approval in ") || !strings.Contains(text(res), "Nothing ran") {
		t.Fatalf("at the hold: %q %v", text(res), err)
	}
	// One call waits (max_pending 1): a new one is refused, its retry is
	// not.
	res2, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "deploy", Arguments: map[string]any{"service": "cache"}})
	if err != nil || !res2.IsError || !strings.Contains(text(res2), "max_pending") || len(api.buttons(slackAllow)) != seen+1 {
		t.Fatalf("a second waiting call: %q %v", text(res2), err)
	}
	// An MCP call is Airlock's to run: the approval API does not find it,
	// so it cannot be consumed there (which would run it twice).
	_, id, _ := strings.Cut(text(res), "(request ")
	id, _, _ = strings.Cut(id, ")")
	if status, _ := gwCall(t, "POST", "http://"+addr+"/v1/approvals/"+id+"/consume", gwBobToken, ""); id == "" || status != 404 {
		t.Fatalf("the MCP call %q consumed over the approval API: %d", id, status)
	}
	press(slackAllow, newCard(slackAllow))
	waitUntil(t, "the allowed call's run", func() bool { return tools.count("/deploy/web") == 1 })
	for i := range 2 {
		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "deploy", Arguments: map[string]any{"service": "web"}})
		if err != nil || res.IsError || !strings.Contains(text(res), "/deploy/web") {
			t.Fatalf("retry %d: %q %v", i+1, text(res), err)
		}
	}
	if n := tools.count("/deploy/web"); n != 1 {
		t.Fatalf("the tool ran %d times for one approval", n)
	}
	if n := len(api.buttons(slackAllow)); n != seen {
		t.Fatalf("the retries posted %d cards", n-seen)
	}

	// A client that gives up: the card waits on and says so.
	short, stop := context.WithTimeout(ctx, time.Second)
	defer stop()
	if _, err := cs.CallTool(short, &mcp.CallToolParams{Name: "deploy", Arguments: map[string]any{"service": "late"}}); err == nil {
		t.Fatal("a cancelled call returned")
	}
	waitUntil(t, "the card saying the agent stopped waiting", func() bool {
		for _, u := range api.updates() {
			if strings.Contains(u.Get("blocks"), "stopped waiting") {
				return true
			}
		}
		return false
	})
}

// TestMCPServerWithTheTypeScriptSDK drives Airlock's MCP server with the
// official TypeScript SDK's client (@modelcontextprotocol/sdk, installed by
// .ci/run with npm ci): it lists its tools, makes an ungated call, and a
// gated one that returns the tool's result once the card's Allow is
// clicked in the fake Slack.
func TestMCPServerWithTheTypeScriptSDK(t *testing.T) {
	skipShort(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("no node")
	}
	dir, _ := filepath.Abs(filepath.Join("testdata", "tsclient"))
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		t.Skip("the TypeScript SDK is not installed: npm ci --prefix cmd/airlock/testdata/tsclient (.ci/run does)")
	}
	api, tools, addr := mcpRig(t)
	cmd := exec.Command(node, filepath.Join(dir, "client.mjs"), "http://"+addr+"/mcp", gwBobToken)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the gated call's card", func() bool { return len(api.buttons(slackAllow)) == 1 })
	if code, err := postSigned(addr, actionBody("UALICE", slackAllow, api.buttons(slackAllow)[0]), "application/x-www-form-urlencoded"); err != nil || code != 200 {
		t.Fatalf("click: %d %v", code, err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the TypeScript client: %v\n%s\n%s", err, out.String(), errOut.String())
	}
	var got struct {
		Tools   []string
		Ungated struct {
			IsError bool
			Text    string
		}
		Gated struct {
			IsError bool
			Text    string
		}
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if !slices.Equal(got.Tools, []string{"deploy", "service_status"}) {
		t.Fatalf("tools: %v", got.Tools)
	}
	if got.Ungated.IsError || !strings.Contains(got.Ungated.Text, "/status/ts") {
		t.Fatalf("ungated: %+v", got.Ungated)
	}
	if got.Gated.IsError || !strings.Contains(got.Gated.Text, "/deploy/ts") || tools.count("/deploy/ts") != 1 {
		t.Fatalf("gated: %+v (%d runs)", got.Gated, tools.count("/deploy/ts"))
	}
}

// TestMCPServerRunsARunbook: a runbook offered over MCP (runbook__restart)
// runs as a model-started one does: its gated step's card waits in chat,
// and once allowed the run goes on; the call's result is the run's
// summary, and each step ran once.
func TestMCPServerRunsARunbook(t *testing.T) {
	skipShort(t)
	api := newSlackAPI(t)
	model := callingModel(t)
	tools := newToolServer(t)
	dir := t.TempDir()
	addr := freeAddr(t)
	path := writeConfig(t, dir, fmt.Sprintf(`
%s
channels: [{platform: slack, id: COPS, approvers: [UALICE]}]
tools:
  - name: status
    parameters: {type: object, properties: {service: {type: string}}, required: [service]}
    http: {method: POST, url: "%s/status/{{.service}}"}
%s
runbooks:
  - name: restart
    description: Restart a service and check it came back.
    parameters: {type: object, properties: {service: {type: string, enum: [api, web]}}, required: [service]}
    steps:
      - {id: before, tool: status, args: {service: "{{ params.service }}"}}
      - {id: deploy, tool: deploy, args: {service: "{{ params.service }}"}}
      - {id: after, tool: status, args: {service: "{{ params.service }}"}}
gateway:
  mcp: {path: /mcp, hold: 30s}
  clients:
    - {name: bob-cursor, token: %q, acts_for: UBOB, channel: {platform: slack, id: COPS}, tools: ["runbook__restart"]}
`, slackRunHead(addr, "sqlite", dir+"/airlock.db", model.BaseURL(), api.URL+"/api/"), tools.URL, deployToolYAML(tools.URL, "service"), gwBobToken))
	startRun(t, path)
	waitReady(t, addr)
	cs, err := mcpConnect(t, "http://"+addr+"/mcp", gwBobToken)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	list, err := cs.ListTools(ctx, nil)
	if err != nil || len(list.Tools) != 1 || list.Tools[0].Name != "runbook__restart" {
		t.Fatalf("tools: %+v %v", list, err)
	}
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "runbook__restart", Arguments: map[string]any{"service": "api"}})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	waitUntil(t, "the deploy step's card", func() bool { return len(api.buttons(slackAllow)) == 1 })
	if code, err := postSigned(addr, actionBody("UALICE", slackAllow, api.buttons(slackAllow)[0]), "application/x-www-form-urlencoded"); err != nil || code != 200 {
		t.Fatalf("click: %d %v", code, err)
	}
	var res *mcp.CallToolResult
	select {
	case res = <-done:
	case <-time.After(40 * time.Second):
		t.Fatal("the runbook call did not return")
	}
	if res == nil || res.IsError || !strings.Contains(text(res), "Runbook restart") || !strings.Contains(text(res), "succeeded") {
		t.Fatalf("the runbook's result: %v", res)
	}
	if tools.count("/deploy/api") != 1 || tools.count("/status/api") != 2 {
		t.Fatalf("steps ran: deploy %d, status %d", tools.count("/deploy/api"), tools.count("/status/api"))
	}
}
