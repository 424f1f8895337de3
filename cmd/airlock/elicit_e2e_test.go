package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockhq/airlock/adapters/slack"
	"github.com/airlockhq/airlock/adapters/slack/slacktest"
)

// askingServer is an upstream MCP server (streamable HTTP, the Go SDK's)
// whose tools ask a question during the call (input required, answered
// within the call): ship asks where to ship (a choice and a whole
// number), tag asks for a list, which no form holds.
type askingServer struct {
	URL     string
	mu      sync.Mutex
	answers []string // what each finished call was told
}

func newAskingServer(t *testing.T) *askingServer {
	t.Helper()
	s := &askingServer{}
	srv := mcp.NewServer(&mcp.Implementation{Name: "deployer", Version: "1"}, nil)
	finish := func(r *mcp.ElicitResult) (*mcp.CallToolResult, any, error) {
		out := r.Action
		if r.Action == "accept" {
			out = fmt.Sprintf("shipped to %v x%v", r.Content["env"], r.Content["replicas"])
		}
		s.mu.Lock()
		s.answers = append(s.answers, out)
		s.mu.Unlock()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: out}}}, nil, nil
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "ship", Description: "Ships a service where a person says."},
		func(_ context.Context, req *mcp.CallToolRequest, in struct {
			Service string `json:"service"`
		}) (*mcp.CallToolResult, any, error) {
			if r, ok := req.Params.InputResponses["target"].(*mcp.ElicitResult); ok {
				return finish(r)
			}
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"target": &mcp.ElicitParams{
				Message: "Ship " + in.Service + " where? <!channel> <@UALICE>",
				RequestedSchema: json.RawMessage(`{"type":"object","properties":{
					"env":{"type":"string","title":"Environment","enum":["prod","staging"]},
					"replicas":{"type":"integer","minimum":1}},"required":["env"]}`),
			}}}, nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "tag", Description: "Asks for tags."},
		func(_ context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
			if r, ok := req.Params.InputResponses["tags"].(*mcp.ElicitResult); ok {
				return finish(r)
			}
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"tags": &mcp.ElicitParams{
				Message:         "Which tags?",
				RequestedSchema: json.RawMessage(`{"type":"object","properties":{"tags":{"type":"array","items":{"type":"string","enum":["a","b"]}}}}`),
			}}}, nil, nil
		})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	s.URL = hs.URL
	return s
}

func (s *askingServer) told() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.answers...)
}

// answerBody is the answer modal's view_submission by user, one value per
// input.
func answerBody(user, metadata string, values ...string) []byte {
	state := map[string]any{}
	for i, v := range values {
		state[fmt.Sprintf("airlock_answer_%d", i)] = map[string]any{"airlock_answer_input": map[string]any{"type": "plain_text_input", "value": v}}
	}
	p, _ := json.Marshal(map[string]any{
		"type": "view_submission", "trigger_id": "1.2.4", "api_app_id": "A1",
		"user": map[string]any{"id": user, "username": "u", "team_id": "T1"},
		"team": map[string]any{"id": "T1"},
		"view": map[string]any{"id": "V1", "type": "modal", "callback_id": slack.CallbackAnswer, "private_metadata": metadata,
			"state": map[string]any{"values": state}},
	})
	return []byte(url.Values{"payload": {string(p)}}.Encode())
}

// TestUpstreamQuestionAnsweredFromSlack drives a real `airlock run` (Slack
// HTTP mode, SQLite) whose upstream MCP server asks a question during a
// call an MCP client made through Airlock: the question is posted in the
// client's channel with the server's words inert; someone who is not an
// approver cannot answer; the form refuses a value that does not fit and
// stays open; the approver's answer reaches the server, which finishes
// the call, after longer than the server's timeout (the person's time is
// not the call's); a second answer changes nothing. Decline tells the
// server no; a question of a list is declined by Airlock, saying so.
func TestUpstreamQuestionAnsweredFromSlack(t *testing.T) {
	skipShort(t)
	api := newSlackAPI(t)
	model := callingModel(t)
	up := newAskingServer(t)
	dir := t.TempDir()
	addr := freeAddr(t)
	path := writeConfig(t, dir, fmt.Sprintf(`
%s
channels: [{platform: slack, id: COPS, approvers: [UALICE]}]
mcp_servers:
  - {name: deployer, url: %q, confirm: false, timeout: 2s}
gateway:
  mcp: {path: /mcp}
  clients:
    - {name: bob-cursor, token: %q, acts_for: UBOB, channel: {platform: slack, id: COPS}, tools: ["deployer__*"]}
`, slackRunHead(addr, "sqlite", dir+"/airlock.db", model.BaseURL(), api.URL+"/api/"), up.URL+"/", gwBobToken))
	startRun(t, path)
	waitReady(t, addr)
	cs, err := mcpConnect(t, "http://"+addr+"/mcp", gwBobToken)
	if err != nil {
		t.Fatal(err)
	}
	press := func(user, actionID, value string) {
		t.Helper()
		if code, err := postSigned(addr, actionBody(user, actionID, value), "application/x-www-form-urlencoded"); err != nil || code != 200 {
			t.Fatalf("click: %d %v", code, err)
		}
	}
	type called struct {
		res *mcp.CallToolResult
		err error
	}
	call := func(tool, service string) chan called {
		done := make(chan called, 1)
		go func() {
			args := map[string]any{}
			if service != "" {
				args["service"] = service
			}
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args})
			done <- called{res, err}
		}()
		return done
	}

	done := call("deployer__ship", "api")
	waitUntil(t, "the question", func() bool { return len(api.buttons(slack.ActionAnswer)) == 1 })
	asked := time.Now()
	ref := api.buttons(slack.ActionAnswer)[0]
	posts := api.posts()
	blocks := posts[len(posts)-1].Get("blocks")
	if all, _ := formatted(t, blocks); !strings.Contains(all, "Ship api where? <!channel> <@UALICE>") || pings(t, blocks, "Ship api") ||
		!strings.Contains(all, "deployer__ship") || !strings.Contains(all, "one of: prod, staging") {
		t.Fatalf("the question as posted: %s", blocks)
	}

	press("UBOB", slack.ActionAnswer, ref) // the agent's own person is no approver here
	waitUntil(t, "bob refused", api.told("UBOB", "can't approve"))
	if n := len(api.callsTo("views.open")); n != 0 {
		t.Fatalf("a non-approver got the form (%d views.open)", n)
	}
	press("UALICE", slack.ActionAnswer, ref)
	waitUntil(t, "the answer form", func() bool { return len(api.callsTo("views.open")) == 1 })
	var view struct {
		CallbackID      string `json:"callback_id"`
		PrivateMetadata string `json:"private_metadata"`
	}
	raw := api.callsTo("views.open")[0].Get("view")
	if err := json.Unmarshal([]byte(raw), &view); err != nil || view.CallbackID != slack.CallbackAnswer ||
		!strings.Contains(raw, "airlock_answer_1") || strings.Contains(raw, "airlock_answer_2") {
		t.Fatalf("views.open view %s (%v)", raw, err)
	}
	if answer := postSignedBody(t, addr, answerBody("UALICE", view.PrivateMetadata, "dev", "")); !strings.Contains(answer, `"response_action":"errors"`) ||
		!strings.Contains(answer, "airlock_answer_0") || !strings.Contains(answer, "one of: prod, staging") {
		t.Fatalf("a value outside the choices was answered %q", answer)
	}
	time.Sleep(time.Until(asked.Add(2500 * time.Millisecond))) // past the server's 2 s timeout
	if answer := postSignedBody(t, addr, answerBody("UALICE", view.PrivateMetadata, "prod", "3")); answer != "" {
		t.Fatalf("the answer was answered %q", answer)
	}
	c := <-done
	if c.err != nil || c.res.IsError || text(c.res) != "shipped to prod x3" {
		t.Fatalf("the call after the answer: %v %v", c.res, c.err)
	}
	waitUntil(t, "the question marked answered", func() bool {
		us := api.updates()
		return len(us) > 0 && strings.Contains(us[len(us)-1].Get("blocks"), "Answered by") && !strings.Contains(us[len(us)-1].Get("blocks"), slack.ActionAnswer)
	})
	postSignedBody(t, addr, answerBody("UALICE", view.PrivateMetadata, "staging", "1"))
	waitUntil(t, "a second answer refused", api.told("UALICE", "already answered"))

	// Decline: the server is told no.
	done = call("deployer__ship", "web")
	waitUntil(t, "the second question", func() bool { return len(api.buttons(slack.ActionDecline)) == 2 })
	press("UALICE", slack.ActionDecline, api.buttons(slack.ActionDecline)[1])
	if c := <-done; c.err != nil || text(c.res) != "decline" {
		t.Fatalf("the declined call: %v %v", c.res, c.err)
	}

	// A list: no form holds it; declined by Airlock, saying so, no buttons.
	if c := <-call("deployer__tag", ""); c.err != nil || text(c.res) != "decline" {
		t.Fatalf("the call asking for a list: %v %v", c.res, c.err)
	}
	posts = api.posts()
	if last := posts[len(posts)-1].Get("blocks"); !strings.Contains(last, "Declined by Airlock") || !strings.Contains(last, "array") ||
		strings.Contains(last, slack.ActionAnswer) {
		t.Fatalf("the list question as posted: %s", last)
	}
	if got := up.told(); strings.Join(got, "|") != "shipped to prod x3|decline|decline" {
		t.Fatalf("the server was told %v", got)
	}
}

// formatted is slacktest.Formatted of a blocks parameter as Slack
// received it.
func formatted(t *testing.T, blocks string) (all string, mrkdwn []string) {
	t.Helper()
	all, mrkdwn, err := slacktest.Formatted([]byte(blocks))
	if err != nil {
		t.Fatalf("blocks %q: %v", blocks, err)
	}
	return all, mrkdwn
}

// pings reports whether a text Slack formats in blocks holds
// "<!channel>" (which Airlock never writes) or one of the fragments of
// outside text: there it would ping, link or format. (Airlock's own
// words there name people, <@U…>, and times, <!date…>.)
func pings(t *testing.T, blocks string, fragments ...string) bool {
	_, md := formatted(t, blocks)
	for _, s := range md {
		if strings.Contains(s, "<!channel>") {
			return true
		}
		for _, f := range fragments {
			if strings.Contains(s, f) {
				return true
			}
		}
	}
	return false
}
