package agent_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/agent"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/model"
	"github.com/airlockhq/airlock/model/modeltest"
)

// core records what the agent asks of the approval core.
type core struct {
	requests [][]confirm.ToolCall
	answers  [][]model.Message
	said     []string
	pause    bool
}

func (c *core) Specs(confirm.Conversation) []model.ToolSpec { return nil }
func (c *core) Say(_ context.Context, _ confirm.Conversation, text string) error {
	c.said = append(c.said, text)
	return nil
}
func (c *core) Request(_ context.Context, _ confirm.Conversation, _ agent.Requester, reply model.Message) (*confirm.Batch, bool, error) {
	c.requests = append(c.requests, reply.ToolCalls)
	return &confirm.Batch{ID: "b1", Status: confirm.BatchPending}, c.pause, nil
}
func (c *core) Finish(context.Context, confirm.Conversation, *confirm.Batch) (bool, error) {
	return true, nil
}
func (c *core) Answer(_ context.Context, _ confirm.Conversation, msgs ...model.Message) error {
	c.answers = append(c.answers, msgs)
	return nil
}

// messages is a conversation's stored history.
type messages []confirm.Message

func (m messages) Messages(context.Context, int64) ([]confirm.Message, error) { return m, nil }

func stored(t *testing.T, role string, m model.Message) confirm.Message {
	t.Helper()
	body, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return confirm.Message{Role: role, Body: body}
}

func newAgent(t *testing.T, c agent.Core, m agent.Messages, p model.Provider, maxCalls int) *agent.Agent {
	t.Helper()
	a, err := agent.New(agent.Config{Core: c, Messages: m, Model: p, MaxToolRounds: 8, MaxCallsPerReply: maxCalls,
		MaxHistoryMessages: 100, MaxMessageChars: 8000, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// A reply whose calls wait for a person is handed to the core as one
// request, and the model is not asked again until the results are in.
func TestAPausedRequestEndsTheTurn(t *testing.T) {
	c := &core{pause: true}
	m := modeltest.NewScripted().PushCalls(confirm.ToolCall{ID: "1", Name: "deploy", Args: json.RawMessage(`{}`)}, confirm.ToolCall{ID: "2", Name: "ban", Args: json.RawMessage(`{}`)})
	m.PushText("never asked")
	hist := messages{stored(t, "user", model.Message{Role: model.RoleUser, Text: "deploy"})}
	if err := newAgent(t, c, hist, m, 32).Converse(context.Background(), confirm.Conversation{ID: 1}, agent.Requester{User: "U1"}, nil); err != nil {
		t.Fatal(err)
	}
	if len(c.requests) != 1 || len(c.requests[0]) != 2 || len(m.Requests()) != 1 || len(c.answers) != 0 {
		t.Fatalf("requests %v, model asked %d times, answers %v; want one request of both calls, one model call, no answer", c.requests, len(m.Requests()), c.answers)
	}
}

// A reply with more calls than allowed asks nobody: no request reaches
// the core, every call gets an error result, and the turn ends with one
// notice naming the limit.
func TestTooManyCallsAskNobody(t *testing.T) {
	c := &core{}
	m := modeltest.NewScripted().PushCalls(confirm.ToolCall{ID: "1", Name: "a"}, confirm.ToolCall{ID: "2", Name: "b"}, confirm.ToolCall{ID: "3", Name: "c"})
	hist := messages{stored(t, "user", model.Message{Role: model.RoleUser, Text: "go"})}
	if err := newAgent(t, c, hist, m, 2).Converse(context.Background(), confirm.Conversation{ID: 1}, agent.Requester{User: "U1"}, nil); err != nil {
		t.Fatal(err)
	}
	if len(c.requests) != 0 || len(c.answers) != 1 {
		t.Fatalf("requests %v, answers %d; want none and one", c.requests, len(c.answers))
	}
	ans := c.answers[0]
	if len(ans) != 3 || len(ans[1].Results) != 3 || !strings.Contains(ans[2].Text, "model.max_calls_per_reply") {
		t.Fatalf("answer %+v", ans)
	}
	for _, r := range ans[1].Results {
		if !r.IsError {
			t.Fatalf("a call got a result that is not an error: %+v", r)
		}
	}
}

// The model never sees a runbook step's messages (it never made those
// calls), and an aside said while calls waited comes after their results.
func TestHistoryLeavesOutStepsAndArrangesAsides(t *testing.T) {
	call := confirm.ToolCall{ID: "1", Name: "deploy", Args: json.RawMessage(`{}`)}
	hist := messages{
		stored(t, "user", model.Message{Role: model.RoleUser, Text: "deploy", Author: "U1"}),
		stored(t, "assistant", model.Message{Role: model.RoleAssistant, ToolCalls: []confirm.ToolCall{call}}),
		stored(t, confirm.RoleRunbookStep, model.Message{Role: model.RoleAssistant, ToolCalls: []confirm.ToolCall{{ID: "s", Name: "restart"}}}),
		stored(t, "user", model.Message{Role: model.RoleUser, Text: "is it done?", Author: "U2", Aside: true}),
		stored(t, "tool", model.Message{Role: model.RoleTool, Results: []model.ToolResult{{CallID: "1", Key: "1", Name: "deploy", Content: "ok"}}}),
	}
	h, err := newAgent(t, &core{}, hist, modeltest.NewScripted(), 32).History(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 4 || h[2].Role != model.RoleTool || !h[3].Aside || !strings.Contains(h[3].Text, "not addressed to you") {
		t.Fatalf("history %+v", h)
	}
	for _, m := range h {
		for _, c := range m.ToolCalls {
			if c.Name == "restart" {
				t.Fatal("a runbook step's call reached the model")
			}
		}
	}
	if !agent.EndsWithResults(h) || agent.LastAuthor(h) != "U1" {
		t.Fatalf("ends with results %v, last author %q", agent.EndsWithResults(h), agent.LastAuthor(h))
	}
}
