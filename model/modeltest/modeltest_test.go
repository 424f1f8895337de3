package modeltest_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"testing"

	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/model"
	"github.com/airlockhq/airlock/model/modeltest"
	"github.com/airlockhq/airlock/model/openai"
)

func TestScriptedPlaysInOrder(t *testing.T) {
	boom := &model.APIError{Status: 503, Message: "down"}
	s := modeltest.NewScripted(model.Message{Text: "one"}).
		PushError(boom).
		PushCalls(confirm.ToolCall{ID: "c1", Name: "deploy", Args: json.RawMessage(`{}`)})
	ctx := context.Background()
	req := model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "a"}}}

	m, err := s.Generate(ctx, req)
	if err != nil || m.Text != "one" || m.Role != model.RoleAssistant {
		t.Fatalf("first: %+v %v", m, err)
	}
	req.Messages[0].Text = "changed after the call"
	req.Messages = append(req.Messages, m)
	if _, err := s.Generate(ctx, req); !errors.Is(err, boom) {
		t.Fatalf("second: %v", err)
	}
	m, err = s.Generate(ctx, req)
	if err != nil || len(m.ToolCalls) != 1 || m.ToolCalls[0].Name != "deploy" {
		t.Fatalf("third: %+v %v", m, err)
	}
	if _, err := s.Generate(ctx, req); !errors.Is(err, modeltest.ErrScriptExhausted) {
		t.Fatalf("fourth: %v", err)
	}
	reqs := s.Requests()
	if len(reqs) != 4 || len(reqs[0].Messages) != 1 || len(reqs[1].Messages) != 2 {
		t.Fatalf("requests %+v", reqs)
	}
	if reqs[0].Messages[0].Text != "a" {
		t.Errorf("recorded request changed with the caller's slice: %q", reqs[0].Messages[0].Text)
	}
	if s.Remaining() != 0 {
		t.Errorf("remaining %d", s.Remaining())
	}
}

func TestScriptedCancelledContext(t *testing.T) {
	s := modeltest.NewScripted().PushText("kept")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Generate(ctx, model.Request{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	if s.Remaining() != 1 {
		t.Fatal("a cancelled call consumed a reply")
	}
}

func TestScriptedConcurrent(t *testing.T) {
	s := &modeltest.Scripted{}
	for range 50 {
		s.PushText("x")
	}
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if _, err := s.Generate(context.Background(), model.Request{}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := len(s.Requests()); n != 50 {
		t.Fatalf("%d requests", n)
	}
}

// The fake speaks the wire format the real client expects, both ways.
func TestOpenAIServerWithProvider(t *testing.T) {
	srv := modeltest.NewOpenAIServer(t, modeltest.OpenAIScript(t,
		modeltest.OpenAIReply{Text: "Checking.", ToolCalls: []modeltest.OpenAIToolCall{
			{ID: "call_1", Name: "deploy", Arguments: `{"env": "prod"}`},
			{Name: "status", Arguments: `{}`},
		}},
		modeltest.TextReply("Done."),
		modeltest.ErrorReply(http.StatusTooManyRequests, "slow down"),
	))
	p, err := openai.New(openai.Config{APIKey: "sk-fake", BaseURL: srv.BaseURL(), Model: "gpt-fake"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	user := model.Message{Role: model.RoleUser, Text: "deploy prod"}
	tools := []model.ToolSpec{{Name: "deploy", Description: "Deploy.", Parameters: json.RawMessage(`{"type":"object"}`)}}
	first, err := p.Generate(ctx, model.Request{System: "sys", Messages: []model.Message{user}, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	if first.Text != "Checking." || len(first.ToolCalls) != 2 {
		t.Fatalf("first %+v", first)
	}
	if c := first.ToolCalls[0]; c.ID != "call_1" || string(c.Args) != `{"env": "prod"}` {
		t.Errorf("call 0 %+v", c)
	}
	if c := first.ToolCalls[1]; c.ID == "" || c.Name != "status" {
		t.Errorf("call 1 %+v (the fake fills in ids)", c)
	}
	keys := confirm.Keys(first.ToolCalls)
	results := model.Message{Role: model.RoleTool, Results: []model.ToolResult{
		{CallID: first.ToolCalls[0].ID, Key: keys[0], Name: "deploy", Content: "deployed"},
		{CallID: first.ToolCalls[1].ID, Key: keys[1], Name: "status", Content: "green"},
	}}
	second, err := p.Generate(ctx, model.Request{System: "sys", Messages: []model.Message{user, first, results}, Tools: tools})
	if err != nil || second.Text != "Done." {
		t.Fatalf("second %+v %v", second, err)
	}
	_, err = p.Generate(ctx, model.Request{Messages: []model.Message{user}})
	var ae *model.APIError
	if !errors.As(err, &ae) || ae.Status != 429 || ae.Message != "slow down" {
		t.Fatalf("third: %v", err)
	}

	reqs := srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests", len(reqs))
	}
	r := reqs[0]
	if r.Path != "/v1/chat/completions" || r.APIKey != "sk-fake" || r.Model != "gpt-fake" {
		t.Errorf("request 0: path %q key %q model %q", r.Path, r.APIKey, r.Model)
	}
	if len(r.Tools) != 1 || r.Tools[0].Name != "deploy" || string(r.Tools[0].Parameters) != `{"type":"object"}` {
		t.Errorf("tools %+v", r.Tools)
	}
	if len(r.Messages) != 2 || r.Messages[0].Role != "system" || r.Messages[1].Content != "deploy prod" {
		t.Errorf("messages %+v", r.Messages)
	}
	m := reqs[1].Messages
	if len(m) != 5 {
		t.Fatalf("request 1 messages %+v", m)
	}
	if m[2].Role != "assistant" || len(m[2].ToolCalls) != 2 || m[2].ToolCalls[0].Arguments != `{"env": "prod"}` {
		t.Errorf("assistant %+v", m[2])
	}
	for i, want := range []string{first.ToolCalls[0].ID, first.ToolCalls[1].ID} {
		if got := m[3+i]; got.Role != "tool" || got.ToolCallID != want || m[2].ToolCalls[i].ID != want {
			t.Errorf("tool message %d: %+v, want tool_call_id %q", i, got, want)
		}
	}
}

func TestOpenAIServerBareBaseURLAndNoIDs(t *testing.T) {
	srv := modeltest.NewOpenAIServer(t, func(req modeltest.OpenAIRequest) modeltest.OpenAIReply {
		return modeltest.OpenAIReply{OmitIDs: true, ToolCalls: []modeltest.OpenAIToolCall{{Name: "a", Arguments: `{}`}, {Name: "b", Arguments: `{}`}}}
	})
	p, err := openai.New(openai.Config{BaseURL: srv.URL, Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	msg, err := p.Generate(context.Background(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "x"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(msg.ToolCalls) != 2 || msg.ToolCalls[0].ID != "" || msg.ToolCalls[1].ID != "" {
		t.Fatalf("calls %+v", msg.ToolCalls)
	}
	r := srv.Requests()[0]
	if r.Path != "/chat/completions" || r.APIKey != "" {
		t.Errorf("path %q key %q", r.Path, r.APIKey)
	}
}
