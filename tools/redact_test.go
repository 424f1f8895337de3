package tools

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/redact"
)

const capSecret = "sk-live-0123456789abcdef"

// leftover reports whether out ends in (or holds) the start of capSecret:
// 4 characters or more of it.
func leftover(out string) bool {
	return strings.Contains(out, capSecret[:4])
}

// TestSecretAtTheCapIsScrubbedWhole: a service that places a secret
// across the output cap (the tool cuts at 16 KiB) gets no part of it past
// the tool, at every offset of the cut, for http and exec results and the
// output errors quote.
func TestSecretAtTheCapIsScrubbedWhole(t *testing.T) {
	r := redact.New([]string{capSecret})
	opts := Options{Redactor: r}
	for _, before := range []int{1, 4, len(capSecret) / 2, len(capSecret) - 1} {
		body := strings.Repeat("a", DefaultMaxOutput-before) + capSecret + strings.Repeat("z", 100)
		check := func(what, out string) {
			t.Helper()
			if leftover(out) {
				i := strings.Index(out, capSecret[:4])
				t.Errorf("%s, %d bytes before the cap: part of the secret left: %q", what, before, out[i:min(len(out), i+40)])
			}
			if !strings.Contains(out, "[output truncated") {
				t.Errorf("%s: not noted as cut", what)
			}
		}
		srv := newRecorder(t, reply(200, body))
		out, err := httpSet(t, srv, HTTPConfig{URL: "/x"}, opts).Run(context.Background(), json.RawMessage(`{"id":"1"}`), "k")
		if err != nil {
			t.Fatal(err)
		}
		check("http", out)

		args, _ := json.Marshal(map[string]string{"x": body})
		out, err = execTool(t, ExecConfig{Command: []string{"sh", "-c", `printf '%s' "$AIRLOCK_TOOL_ARGS" | sed 's/^{"x":"//; s/"}$//'`}}, opts).Run(context.Background(), args, "k")
		if err != nil {
			t.Fatal(err)
		}
		check("exec", out)

		_, err = execTool(t, ExecConfig{Command: []string{"sh", "-c", `printf '%s' "$AIRLOCK_TOOL_ARGS" | sed 's/^{"x":"//; s/"}$//'; exit 3`}}, opts).Run(context.Background(), args, "k")
		if err == nil {
			t.Fatal("exit 3: no error")
		}
		check("exec error", err.Error())
	}
	// The excerpt of a failed response (500 bytes) too.
	for _, before := range []int{1, len(capSecret) / 2} {
		srv := newRecorder(t, reply(500, strings.Repeat("e", errorExcerpt-before)+capSecret))
		_, err := httpSet(t, srv, HTTPConfig{URL: "/x"}, opts).Run(context.Background(), json.RawMessage(`{"id":"1"}`), "k")
		if err == nil || leftover(err.Error()) {
			t.Errorf("http 500 excerpt, %d before the cut: %v", before, err)
		}
	}
	// Whole secrets inside the kept part are scrubbed there too.
	srv := newRecorder(t, func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("token " + capSecret)) })
	if out, err := httpSet(t, srv, HTTPConfig{URL: "/x"}, opts).Run(context.Background(), json.RawMessage(`{"id":"1"}`), "k"); err != nil || out != "token [redacted]" {
		t.Errorf("whole: %q, %v", out, err)
	}
}
