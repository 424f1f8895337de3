// Package modeltest holds test doubles for model providers: Scripted, a
// model.Provider that plays back queued replies; OpenAIServer, a fake
// OpenAI chat-completions HTTP API for end-to-end tests; and Sleeper and
// CancelDuringRateLimitWait for checking a provider's retries.
package modeltest

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/model"
)

// ErrScriptExhausted is returned by Scripted.Generate when nothing is queued.
var ErrScriptExhausted = errors.New("modeltest: scripted provider has no reply queued")

// Scripted is a model.Provider that returns queued messages and errors in
// order and records every request. It is safe for concurrent use; the zero
// value is an empty script.
type Scripted struct {
	mu       sync.Mutex
	queue    []step
	requests []model.Request
}

type step struct {
	msg model.Message
	err error
}

var _ model.Provider = (*Scripted)(nil)

// NewScripted returns a script that answers with msgs in order.
func NewScripted(msgs ...model.Message) *Scripted {
	s := &Scripted{}
	for _, m := range msgs {
		s.Push(m)
	}
	return s
}

// Push queues a reply. An empty Role becomes model.RoleAssistant.
func (s *Scripted) Push(msg model.Message) *Scripted {
	if msg.Role == "" {
		msg.Role = model.RoleAssistant
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, step{msg: msg})
	return s
}

// PushText queues a text reply.
func (s *Scripted) PushText(text string) *Scripted {
	return s.Push(model.Message{Role: model.RoleAssistant, Text: text})
}

// PushCalls queues a reply of tool calls.
func (s *Scripted) PushCalls(calls ...confirm.ToolCall) *Scripted {
	return s.Push(model.Message{Role: model.RoleAssistant, ToolCalls: calls})
}

// PushError queues a failure.
func (s *Scripted) PushError(err error) *Scripted {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, step{err: err})
	return s
}

// Generate records req and returns the next queued reply or error. With a
// done ctx it returns ctx's error and consumes nothing; with an empty queue
// it returns ErrScriptExhausted.
func (s *Scripted) Generate(ctx context.Context, req model.Request) (model.Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, cloneRequest(req))
	if err := ctx.Err(); err != nil {
		return model.Message{}, err
	}
	if len(s.queue) == 0 {
		return model.Message{}, ErrScriptExhausted
	}
	st := s.queue[0]
	s.queue = s.queue[1:]
	if st.err != nil {
		return model.Message{}, st.err
	}
	return st.msg, nil
}

// Requests returns the requests received so far, in order.
func (s *Scripted) Requests() []model.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]model.Request, len(s.requests))
	for i, r := range s.requests {
		out[i] = cloneRequest(r)
	}
	return out
}

// Remaining returns how many replies and errors are still queued.
func (s *Scripted) Remaining() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

// cloneRequest copies the slices a caller might reuse after Generate.
func cloneRequest(r model.Request) model.Request {
	r.Messages = slices.Clone(r.Messages)
	r.Tools = slices.Clone(r.Tools)
	return r
}
