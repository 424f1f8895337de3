package agent

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/model"
)

// History loads the conversation's messages as model messages.
func (a *Agent) History(ctx context.Context, convID int64) ([]model.Message, error) {
	stored, err := a.cfg.Messages.Messages(ctx, convID)
	if err != nil {
		return nil, fmt.Errorf("load history: %w", err)
	}
	out := make([]model.Message, 0, len(stored))
	for _, m := range stored {
		if m.Role == confirm.RoleRunbookStep {
			continue // a runbook step's call and result: the model never made that call
		}
		var mm model.Message
		if err := json.Unmarshal(m.Body, &mm); err != nil {
			return nil, fmt.Errorf("decode message %d: %w", m.Seq, err)
		}
		out = append(out, mm)
	}
	return a.bound(arrange(out)), nil
}

// bound keeps the history within MaxHistoryMessages, dropping the oldest
// messages first. The kept part starts at a user message (or, when no
// user message is late enough, at a reply with tool calls), so a tool call
// is never separated from its results. Any text longer than
// MaxMessageChars is cut with a note.
func (a *Agent) bound(h []model.Message) []model.Message {
	if over := len(h) - a.cfg.MaxHistoryMessages; over > 0 {
		cut := -1
		for i := over; i < len(h) && cut < 0; i++ {
			if h[i].Role == model.RoleUser {
				cut = i
			}
		}
		for i := over; i < len(h) && cut < 0; i++ {
			if h[i].Role == model.RoleAssistant && len(h[i].ToolCalls) > 0 {
				cut = i
			}
		}
		if cut > 0 {
			h = h[cut:]
		}
	}
	max := a.cfg.MaxMessageChars
	for i := range h {
		m := &h[i]
		m.Text = CutText(m.Text, max)
		if len(m.Results) > 0 {
			rs := make([]model.ToolResult, len(m.Results))
			copy(rs, m.Results)
			for j := range rs {
				rs[j].Content = CutText(rs[j].Content, max)
			}
			m.Results = rs
		}
	}
	return h
}

// CutText cuts s to max runes with a note saying how much was left out.
func CutText(s string, max int) string {
	r := []rune(s)
	if len(r) <= max {
		return s
	}
	return string(r[:max]) + fmt.Sprintf("\n[cut by Airlock: %d more characters not shown]", len(r)-max)
}

// arrange moves asides said while a reply's tool calls waited for their
// results to just after those results, so every tool call is directly
// followed by its results as providers require, and labels asides for
// the model.
func arrange(h []model.Message) []model.Message {
	out := make([]model.Message, 0, len(h))
	var held []model.Message
	waiting := false
	for _, m := range h {
		if m.Role == model.RoleUser && m.Aside {
			m.Text = fmt.Sprintf("[said in the thread by %s, not addressed to you] %s", m.Author, m.Text)
			if waiting {
				held = append(held, m)
				continue
			}
		}
		out = append(out, m)
		switch {
		case m.Role == model.RoleAssistant && len(m.ToolCalls) > 0:
			waiting = true
		case m.Role == model.RoleTool:
			waiting = false
			out = append(out, held...)
			held = nil
		}
	}
	return append(out, held...)
}

// roundsThisTurn counts the tool rounds since the last user message.
func roundsThisTurn(h []model.Message) int {
	n := 0
	for i := len(h) - 1; i >= 0; i-- {
		switch {
		case h[i].Role == model.RoleUser && !h[i].Aside:
			return n
		case h[i].Role == model.RoleAssistant && len(h[i].ToolCalls) > 0:
			n++
		}
	}
	return n
}

// LastAuthor is the author of the newest message addressed to the bot.
func LastAuthor(h []model.Message) string {
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].Role == model.RoleUser && !h[i].Aside {
			return h[i].Author
		}
	}
	return ""
}

// EndsWithResults reports whether the newest message other than asides is
// a tool-results message: the model has not answered it yet.
func EndsWithResults(h []model.Message) bool {
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].Role == model.RoleUser && h[i].Aside {
			continue
		}
		return h[i].Role == model.RoleTool
	}
	return false
}
