package slack

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// initialValue is the edit modal's pre-filled arguments, from the
// views.open payload.
func initialValue(t *testing.T, view map[string]any) string {
	t.Helper()
	blocks, _ := view["blocks"].([]any)
	for _, b := range blocks {
		m, _ := b.(map[string]any)
		if m["block_id"] != EditBlockID {
			continue
		}
		el, _ := m["element"].(map[string]any)
		if v, ok := el["initial_value"].(string); ok {
			return v
		}
	}
	t.Fatalf("no initial_value in the edit modal: %s", mustJSON(view))
	return ""
}

// The Edit… modal shows hidden characters of the arguments as JSON
// escapes, never raw (a right-to-left override would reorder what the
// approver reads and edits); submitted unchanged, they are the same
// arguments.
func TestEditModalEscapesHiddenCharacters(t *testing.T) {
	w := newWorld(t, ModeHTTP)
	args := `{"service":"api` + "\u202e" + `ecivres","note":"zero` + "\u200b" + `width` + "\u0085" + `c1` + "\u2066" + `iso"}`
	w.model.PushCalls(tc("call_deploy", "deploy", args)).PushText("Deployed.")
	card := w.askDeploy()
	allow := refByStyle(t, card, "primary")
	w.deliverInteraction(clickOn(card, alice, ActionEdit, allow))
	waitFor(t, "views.open", func() bool { return len(w.fake.callsTo("views.open")) == 1 })
	view := w.fake.callsTo("views.open")[0].JSON["view"].(map[string]any)
	got := initialValue(t, view)
	for _, raw := range []string{"\u202e", "\u200b", "\u0085", "\u2066"} {
		if strings.Contains(got, raw) {
			t.Errorf("the modal pre-fills %U raw:\n%s", []rune(raw)[0], got)
		}
	}
	for _, esc := range []string{`\u202e`, `\u200b`, `\u0085`, `\u2066`} {
		if !strings.Contains(got, esc) {
			t.Errorf("the modal lacks the escape %s:\n%s", esc, got)
		}
	}
	var before, after map[string]any
	if err := json.Unmarshal([]byte(args), &before); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(got), &after); err != nil || !reflect.DeepEqual(before, after) {
		t.Fatalf("the pre-filled text decodes to %v (%v), want the arguments %v", after, err, before)
	}

	// Submitted as pre-filled, the call runs with the same arguments.
	meta, _ := view["private_metadata"].(string)
	if resp := w.submitView(editSubmission(alice, meta, got)); resp != "" {
		t.Fatalf("the unchanged submission answered %q", resp)
	}
	w.waitText(chanOps, "Deployed.")
	w.ad.Wait()
	var ran map[string]any
	if err := json.Unmarshal([]byte(w.tools["deploy"].lastArgs()), &ran); err != nil || !reflect.DeepEqual(ran, before) {
		t.Fatalf("deploy ran with %s, want the same value as %s", w.tools["deploy"].lastArgs(), args)
	}
}
