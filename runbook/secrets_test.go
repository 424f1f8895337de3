package runbook

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// A step's secret references are put in only where its configuration
// holds them: an interpolated value that would add one is refused, a
// value an expression gives whole is never expanded, and a reference
// without a value stops the expansion naming the reference.
func TestSecretsOnlyWhereConfigured(t *testing.T) {
	cfg := Config{Name: "s", Steps: []StepConfig{{ID: "a", Tool: "t", Args: map[string]any{
		"auth":  "Bearer ${TOKEN} for {{ params.who }}",
		"who":   "{{ params.who }}",
		"list":  []any{"x", map[string]any{"k": "${file:/run/k}"}},
		"plain": "no secret",
	}}}}
	rbs, err := Compile("runbooks", []Config{cfg}, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := rbs[0].Step("a")
	if _, err := st.Args(Vars{Params: map[string]any{"who": "${TOKEN}"}}); err == nil || !strings.Contains(err.Error(), "${TOKEN}") {
		t.Fatalf("a parameter adding the reference: %v", err)
	}
	raw, err := st.Args(Vars{Params: map[string]any{"who": "ops ${OTHER}"}})
	if err != nil {
		t.Fatal(err)
	}
	paths := cfg.Steps[0].SecretPaths()
	if len(paths) != 2 || strings.Join(paths[0].Path, "/") != "auth" || strings.Join(paths[1].Path, "/") != "list/1/k" {
		t.Fatalf("paths %+v", paths)
	}
	values := map[string]string{"${TOKEN}": "tok-123456", "${file:/run/k}": "key-654321", "${OTHER}": "other-secret"}
	lookup := func(r string) (string, bool) { v, ok := values[r]; return v, ok }
	out, err := ExpandSecrets(raw, paths, lookup)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if got["auth"] != "Bearer tok-123456 for ops ${OTHER}" || got["who"] != "ops ${OTHER}" || got["list"].([]any)[1].(map[string]any)["k"] != "key-654321" {
		t.Fatalf("expanded %s", out)
	}
	// An edit that moves the reference elsewhere moves its text only.
	moved := json.RawMessage(`{"auth":"none","who":"${TOKEN}","list":["x",{"k":"${TOKEN}"}]}`)
	out, err = ExpandSecrets(moved, paths, lookup)
	if err != nil || strings.Contains(string(out), "tok-123456") {
		t.Fatalf("moved reference expanded: %s, %v", out, err)
	}
	if _, err := ExpandSecrets(raw, paths, func(string) (string, bool) { return "", false }); !errors.Is(err, ErrSecretMissing) || !strings.Contains(err.Error(), "${TOKEN}") {
		t.Fatalf("missing secret: %v", err)
	}
	if out, err := ExpandSecrets(json.RawMessage(`{"a": 1}`), nil, lookup); err != nil || string(out) != `{"a": 1}` {
		t.Fatalf("no paths: %s, %v", out, err)
	}
}
