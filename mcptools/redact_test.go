package mcptools

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/redact"
	"github.com/airlockhq/airlock/tools"
)

const token = "ghp_0123456789abcdefTOKEN"

func partsTool(t *testing.T) tools.Tool {
	t.Helper()
	set := &tools.Set{}
	m := startWith(context.Background(), []Config{memConfig("mem")}, set, nil, memDial(newTestServer(&recorder{}, nil)), options{redact: redact.New([]string{token})})
	t.Cleanup(func() { m.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := m.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return mustTool(t, set, "mem__parts")
}

func runParts(t *testing.T, tool tools.Tool, isError bool, parts ...string) (string, error) {
	t.Helper()
	args, _ := json.Marshal(map[string]any{"parts": parts, "is_error": isError})
	return tool.Run(context.Background(), args, "b/1")
}

// TestSecretSplitAcrossTextParts: a server that sends its token in two
// text parts gets no half of it to the model.
func TestSecretSplitAcrossTextParts(t *testing.T) {
	tool := partsTool(t)
	for _, isError := range []bool{false, true} {
		out, err := runParts(t, tool, isError, "token: "+token[:10], token[10:]+" done")
		var te *ToolError
		if isError {
			if !errors.As(err, &te) {
				t.Fatalf("isError: %v", err)
			}
			out = te.Text
		} else if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(out, token[:10]) || strings.Contains(out, token[10:]) || out != "token: [redacted] done" {
			t.Errorf("isError %v: %q", isError, out)
		}
	}
}

// TestSecretAtTheMCPCap: a token placed across the 16 KiB cap of a result
// (or the cap of an error's text) leaves no part of it.
func TestSecretAtTheMCPCap(t *testing.T) {
	tool := partsTool(t)
	for _, before := range []int{3, len(token) / 2, len(token) - 1} {
		out, err := runParts(t, tool, false, strings.Repeat("a", tools.DefaultMaxOutput-before)+token+"tail")
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(out, token[:3]) || len(out) > tools.DefaultMaxOutput+100 {
			t.Errorf("%d before the cap: %q", before, out[max(0, len(out)-80):])
		}
		_, err = runParts(t, tool, true, strings.Repeat("e", maxErrorText-before)+token+"tail")
		var te *ToolError
		if !errors.As(err, &te) || strings.Contains(te.Text, token[:3]) {
			t.Errorf("error, %d before the cap: %v", before, err)
		}
	}
}

// TestStderrLineCutIsScrubbed: a stderr line cut at maxStderrLine with the
// token across the cut leaves none of it in the log.
func TestStderrLineCutIsScrubbed(t *testing.T) {
	for _, before := range []int{3, len(token) / 2} {
		log, logs := newLog()
		l := &lineLogger{log: log, redact: redact.New([]string{token})}
		l.Write([]byte(strings.Repeat("x", maxStderrLine-before) + token + strings.Repeat("y", 50) + "\n" + "short " + token + "\n"))
		l.flush()
		s := logs.String()
		if strings.Contains(s, token[:3]) || !strings.Contains(s, " [cut]") || !strings.Contains(s, "line=\"short [redacted]\"") {
			t.Errorf("%d before the cut:\n%s", before, s[max(0, strings.Index(s, "xxxxx[")):])
		}
	}
}
