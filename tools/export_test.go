package tools

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestReplaceAndRemove(t *testing.T) {
	s := &Set{}
	for _, n := range []string{"a", "x__1", "b", "x__2"} {
		if err := s.Add(fakeTool{name: n}); err != nil {
			t.Fatal(err)
		}
	}
	// x__2 stays in place, x__1 goes, x__3 follows at the end.
	if err := s.Replace([]string{"x__1", "x__2"}, []Tool{fakeTool{name: "x__2"}, fakeTool{name: "x__3"}}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(s.Names(), ","); got != "a,b,x__2,x__3" {
		t.Fatalf("Names = %s", got)
	}
	if s.Has("x__1") || !s.Has("x__3") {
		t.Fatal("Has after Replace")
	}
	// A name taken by a tool old does not name: nothing changes.
	if err := s.Replace([]string{"x__2"}, []Tool{fakeTool{name: "a"}}); err == nil {
		t.Fatal("Replace took a's name")
	}
	for _, bad := range [][]Tool{{fakeTool{name: "bad name"}}, {fakeTool{name: "y"}, fakeTool{name: "y"}}, {nil}} {
		if err := s.Replace([]string{"x__2", "x__3"}, bad); err == nil {
			t.Fatalf("Replace(%v): no error", bad)
		}
	}
	if got := strings.Join(s.Names(), ","); got != "a,b,x__2,x__3" {
		t.Fatalf("Names after failed Replace = %s", got)
	}
	s.Remove("x__2", "nope", "a")
	if got := strings.Join(s.Names(), ","); got != "b,x__3" {
		t.Fatalf("Names after Remove = %s", got)
	}
	if s.Has("a") || s.Has("x__2") {
		t.Fatal("Has after Remove")
	}
}

func TestCompileSchemaAndDecode(t *testing.T) {
	s, err := CompileSchema(json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"},"n":{"type":"integer"}},"required":["id"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(s.Properties(), ","); got != "id,n" {
		t.Errorf("Properties = %s", got)
	}
	if obj, err := s.Decode(json.RawMessage(`{"id":"a","n":12345678901234567890}`)); err != nil || obj["n"].(json.Number).String() != "12345678901234567890" {
		t.Errorf("Decode = %v, %v", obj, err)
	}
	for _, bad := range []string{`{"n":1}`, `{"id":"a","id":"b"}`, "{\"id\":\"\xff\"}", `[]`, ``} {
		if _, err := s.Decode(json.RawMessage(bad)); !errors.Is(err, ErrInvalidArgs) {
			t.Errorf("Decode(%q) = %v", bad, err)
		}
	}
	if e, err := CompileSchema(nil); err != nil || string(e.JSON()) != emptySchema {
		t.Errorf("empty schema: %v, %v", e, err)
	}
	for _, bad := range []string{
		`{"type":"string"}`,
		`{"$ref":"https://example.com/schema.json"}`, // nothing loaded from the network
		`{"type":"object","type":"object"}`,
		`[1]`,
		`{"type":"object","properties":{"a":{"type":"nope"}}}`,
	} {
		if _, err := CompileSchema(json.RawMessage(bad)); err == nil {
			t.Errorf("CompileSchema(%s): no error", bad)
		}
	}
}

func TestRenderSummaryAndCapOutput(t *testing.T) {
	tmpl, err := ParseSummary(`Open {{.repo}}{{if .title}}: {{.title}}{{end}} {{json .labels}}`)
	if err != nil {
		t.Fatal(err)
	}
	args := map[string]any{"repo": "a/b", "labels": []any{"x"}}
	if got, err := RenderSummary("create", tmpl, []string{"repo", "title", "labels"}, args); err != nil || got != `Open a/b ["x"]` {
		t.Errorf("RenderSummary = %q, %v", got, err)
	}
	if got, _ := RenderSummary("create", nil, nil, args); got != `create(labels=["x"], repo="a/b")` {
		t.Errorf("default = %q", got)
	}
	if _, err := ParseSummary("{{.x"); err == nil {
		t.Error("ParseSummary: no error")
	}
	if got := CapOutput([]byte("héllo"), 2, nil); got != "h\n[output truncated: kept 1 of 6 bytes]" {
		t.Errorf("CapOutput = %q", got)
	}
	if got := CapOutput([]byte("ok"), 0, nil); got != "ok" {
		t.Errorf("CapOutput = %q", got)
	}
}
