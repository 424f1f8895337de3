package slack

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/slack-go/slack"

	cardpkg "github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
)

// sampleRefs are well-formed references of each kind.
var sampleRefs = map[cardpkg.RefKind]string{
	cardpkg.RefCall:     confirm.Ref("abcdefgh", 1),
	cardpkg.RefGrant:    confirm.GrantRef("g1"),
	cardpkg.RefAll:      confirm.AllRef("abcdefgh", 3),
	cardpkg.RefRun:      confirm.RunRef("r1"),
	cardpkg.RefChecked:  confirm.CheckedRef("abcdefgh", 1),
	cardpkg.RefQuestion: confirm.QuestionRef("q1"),
}

// Every kind of button card lists has its row here (a kind added without
// one fails), and the row round-trips: the button the renderer lays out
// for the kind decodes back to the kind and its reference; a button that
// opens a form has the form's renderer; a form that comes back submitted
// decodes to the kind's submission with what was typed.
func TestCodecRoundTripsEveryKind(t *testing.T) {
	for _, b := range cardpkg.Buttons() {
		row, ok := table.ByKind(b.Kind)
		if !ok {
			t.Errorf("%s: no row in Slack's table", b.Name)
			continue
		}
		ref := sampleRefs[b.Ref]
		block := actionsBlock("a", []cardpkg.Action{{Kind: b.Kind, Ref: ref, Label: "x"}}).(*slack.ActionBlock)
		btn := block.Elements.ElementSet[0].(*slack.ButtonBlockElement)
		if btn.ActionID != row.actionID || btn.Value != ref {
			t.Errorf("%s: rendered as %q = %q", b.Name, btn.ActionID, btn.Value)
		}
		in, err := parseInteraction(mustJSON(blockAction(alice, chanOps, mentionTS, btn.ActionID, btn.Value)))
		if err != nil || in.Kind != b.Kind || in.Ref != ref || in.Submit {
			t.Errorf("%s: decoded as %+v, %v", b.Name, in, err)
		}
		if b.Opens != (row.form != nil) {
			t.Errorf("%s: opens a form %v, has one %v", b.Name, b.Opens, row.form != nil)
		}
		if b.Submits != (row.submit != nil) {
			t.Errorf("%s: submits %v, reads a submission %v", b.Name, b.Submits, row.submit != nil)
			continue
		}
		if !b.Submits {
			continue
		}
		meta := ModalMeta{Ref: ref, Channel: chanOps, Thread: mentionTS, Message: CardRef(chanOps, cardTS)}.encode()
		p := viewSubmission(alice, meta, "")
		v := p["view"].(map[string]any)
		v["callback_id"] = row.submit.callbackID
		v["state"] = map[string]any{"values": map[string]any{
			row.submit.block: map[string]any{row.submit.action: map[string]any{"type": "plain_text_input", "value": "typed"}},
		}}
		if row.submit.fields {
			v["state"] = map[string]any{"values": map[string]any{
				answerBlockID(0): map[string]any{answerActionID: map[string]any{"type": "plain_text_input", "value": "typed"}},
				answerBlockID(1): map[string]any{answerActionID: map[string]any{"type": "plain_text_input", "value": nil}},
			}}
		}
		in, err = parseInteraction(mustJSON(p))
		typed := in.Value == "typed"
		if row.submit.fields {
			typed = len(in.Values) == 2 && in.Values[0] == "typed" && in.Values[1] == ""
		}
		if err != nil || in.Kind != b.Kind || !in.Submit || in.Ref != ref || !typed || in.Message != CardRef(chanOps, cardTS) {
			t.Errorf("%s: submission decoded as %+v, %v", b.Name, in, err)
		}
	}
}

// A button Airlock did not post (an unknown action_id, a value that is
// not of its kind's reference, a view that takes no submission) is
// refused at the door (400) and never reaches the bot.
func TestUnknownButtonRefused(t *testing.T) {
	b := newStubBot()
	_, srv := newAckAdapter(t, b, 2, &ackRecorder{})
	w := &world{t: t, events: srv}
	readOnly := viewSubmission(alice, ModalMeta{Ref: "abcdefgh.1", Channel: chanOps, Message: CardRef(chanOps, cardTS)}.encode(), "x")
	readOnly["view"].(map[string]any)["callback_id"] = CallbackShowArgs
	for name, p := range map[string]map[string]any{
		"unknown action_id":        blockAction(alice, chanOps, mentionTS, "airlock_nonsense", "abcdefgh.1"),
		"near an action_id":        blockAction(alice, chanOps, mentionTS, ActionAllow+" ", "abcdefgh.1"),
		"Allow with a grant's":     blockAction(alice, chanOps, mentionTS, ActionAllow, confirm.GrantRef("g1")),
		"Revoke with a call's":     blockAction(alice, chanOps, mentionTS, ActionRevokeGrant, "abcdefgh.1"),
		"Stop run with a card's":   blockAction(alice, chanOps, mentionTS, ActionRunStop, confirm.AllRef("abcdefgh", 1)),
		"read-only view submitted": readOnly,
	} {
		raw, _ := json.Marshal(p)
		code, _ := w.post([]byte(url.Values{"payload": {string(raw)}}.Encode()), formHeader(), true, time.Now())
		if code != http.StatusBadRequest {
			t.Errorf("%s: HTTP %d, want 400", name, code)
		}
	}
	time.Sleep(50 * time.Millisecond) // nothing was queued; give a stray job the time to show
	if calls, started := b.calls(), len(b.started); len(calls) != 0 || started != 0 || b.decided.Load() != 0 {
		t.Fatalf("an unknown button reached the bot: %+v, %d decisions started", calls, started)
	}
}
