package model

import (
	"context"
	"strings"
	"testing"
)

// With no model, every turn is one line saying so, with no tool call, and
// pointing at runbooks.
func TestOffAnswersOneLine(t *testing.T) {
	m, err := Off{}.Generate(context.Background(), Request{Messages: []Message{{Role: RoleUser, Text: "restart api"}}, Tools: []ToolSpec{{Name: "restart_service"}}})
	if err != nil || m.Role != RoleAssistant || len(m.ToolCalls) != 0 || strings.Contains(m.Text, "\n") ||
		!strings.Contains(m.Text, "No model is configured") || !strings.Contains(m.Text, "/runbooks") {
		t.Fatalf("%+v %v", m, err)
	}
}
