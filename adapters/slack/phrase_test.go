package slack

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/bot"
	cardpkg "github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
)

// The phrase modal, as views.open sends it, with a hostile phrase: the
// phrase is a rich_text element (shown literally, no mention or markup),
// and the metadata carries only the reference and where the card is.
func TestPhraseModalGolden(t *testing.T) {
	meta := ModalMeta{Ref: "abcdefghijklmnopqrstuvwxyz.1", Channel: chanOps, Thread: mentionTS, Message: CardRef(chanOps, cardTS)}
	m := PhraseModal(meta, bot.PhrasePrompt{Ref: meta.Ref, Number: 2, Tool: "deploy", Phrase: "<!channel> `x` *prod*/<@U123>"})
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(m); err != nil {
		t.Fatal(err)
	}
	got := buf.Bytes()
	path := filepath.Join("testdata", "modal_phrase.json")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file; run go test ./adapters/slack -run TestPhraseModalGolden -update\ngot:\n%s", path, got)
	}
	if strings.Contains(string(got), `"type": "mrkdwn"`) {
		t.Error("the phrase modal has mrkdwn: the phrase must be literal text")
	}
}

// phraseSubmission is the phrase modal's submission with the phrase typed.
func phraseSubmission(user, privateMetadata, phrase string) map[string]any {
	p := viewSubmission(user, privateMetadata, "")
	v := p["view"].(map[string]any)
	v["callback_id"] = CallbackPhrase
	v["state"] = map[string]any{"values": map[string]any{
		PhraseBlockID: map[string]any{phraseActionID: map[string]any{"type": "plain_text_input", "value": phrase}},
	}}
	return p
}

// criticalDeploys rates every deploy critical.
func criticalDeploys(c *bot.Config) {
	c.Policy = confirm.NewPolicy(true, nil, confirm.PolicyFunc(func(r confirm.Request) confirm.Verdict {
		if r.Call.Name != "deploy" {
			return confirm.Verdict{}
		}
		return confirm.Verdict{Ask: true, Risk: confirm.RiskCritical}
	}))
}

// End to end over the real adapter and bot against the fake Slack: a
// critical call's card offers "Allow…"; a plain Allow click without the
// modal (forged or replayed) is refused; a stranger's "Allow…" opens
// nothing; the approver's opens the phrase modal; a wrong phrase keeps it
// open with the safe message and changes nothing; forged submissions
// (another user, edited metadata) are refused as clicks are; the right
// phrase runs the call once.
func TestE2ECriticalCallNeedsThePhrase(t *testing.T) {
	for _, mode := range []string{ModeHTTP, ModeSocket} {
		t.Run(mode, func(t *testing.T) {
			w := newWorldWith(t, mode, criticalDeploys)
			w.model.PushCalls(tc("call_1", "deploy", `{"service":"api"}`)).PushText("Deployed.")
			card := w.askDeploy()
			w.ad.Wait()
			var ref string
			for _, b := range cardButtons(t, card) {
				if b.ActionID == ActionAllow {
					t.Fatal("a critical call's card offers a plain Allow")
				}
				if b.ActionID == ActionAllowTyped && b.Style == "primary" {
					ref = b.Value
				}
			}
			if ref == "" || !strings.Contains(card.param("blocks"), `"text":"Allow…"`) {
				t.Fatalf("no primary Allow… on the card: %s", card.param("blocks"))
			}

			w.deliverInteraction(clickOn(card, alice, ActionAllow, ref))
			w.waitEphemeral(alice, "needs its confirmation phrase typed")
			w.deliverInteraction(clickOn(card, mallory, ActionAllowTyped, ref))
			w.waitEphemeral(mallory, "can't approve")
			w.ad.Wait()
			if n := len(w.fake.callsTo("views.open")); n != 0 {
				t.Fatalf("%d modals opened before the approver's click", n)
			}

			w.deliverInteraction(clickOn(card, alice, ActionAllowTyped, ref))
			waitFor(t, "views.open", func() bool { return len(w.fake.callsTo("views.open")) == 1 })
			view := w.fake.callsTo("views.open")[0].JSON["view"].(map[string]any)
			meta, _ := view["private_metadata"].(string)
			raw, _ := json.Marshal(view)
			if view["callback_id"] != CallbackPhrase || !strings.Contains(string(raw), `"text":"deploy"`) {
				t.Fatalf("phrase modal: %s", raw)
			}
			var m ModalMeta
			if err := json.Unmarshal([]byte(meta), &m); err != nil || m.Ref != ref || m.Channel != chanOps || m.Message != CardRef(chanOps, card.TS) {
				t.Fatalf("metadata %q: %v", meta, err)
			}

			resp := w.submitView(phraseSubmission(alice, meta, "Deploy"))
			var got struct {
				ResponseAction string            `json:"response_action"`
				Errors         map[string]string `json:"errors"`
			}
			if err := json.Unmarshal([]byte(resp), &got); err != nil || got.ResponseAction != "errors" ||
				got.Errors[PhraseBlockID] != bot.UserMessage(bot.ErrWrongPhrase) {
				t.Fatalf("a wrong phrase answered %q (%v)", resp, err)
			}
			w.waitNothingChanged("a wrong phrase changed something")

			// Forged submissions with the right phrase.
			if resp := w.submitView(phraseSubmission(mallory, meta, "deploy")); resp != "" {
				t.Errorf("a stranger's submission answered %q", resp)
			}
			w.waitEphemeral(mallory, "can't approve")
			elsewhere := m
			elsewhere.Channel, elsewhere.Message = chanOther, CardRef(chanOther, card.TS)
			if resp := w.submitView(phraseSubmission(alice, elsewhere.encode(), "deploy")); resp != "" {
				t.Errorf("a submission with edited metadata answered %q", resp)
			}
			otherRef := m
			otherRef.Ref = strings.TrimSuffix(ref, ".0") + ".5"
			w.submitView(phraseSubmission(alice, otherRef.encode(), "deploy"))
			w.waitEphemeral(alice, "This button is not one I know.")
			w.waitNothingChanged("a forged submission changed something")
			if rej := w.audit(confirm.AuditRejectedClick); len(rej) < 4 {
				t.Errorf("%d rejected clicks audited, want the forged and wrong ones", len(rej))
			}

			if resp := w.submitView(phraseSubmission(alice, meta, "  deploy ")); resp != "" {
				t.Fatalf("the right phrase answered %q", resp)
			}
			w.waitText(chanOps, "Deployed.")
			w.ad.Wait()
			if n := w.tools["deploy"].runs.Load(); n != 1 {
				t.Fatalf("deploy ran %d times, want once", n)
			}
		})
	}
}

// The edit modal of a critical call says saving does not allow it.
func TestHeldEditModalSaysItDoesNotAllow(t *testing.T) {
	meta := ModalMeta{Ref: "abc.1", Channel: chanOps, Message: CardRef(chanOps, cardTS)}
	m := EditModal(meta, bot.EditForm{Ref: "abc.1", Number: 1, Tool: "deploy", Args: "{}", Holds: true})
	raw, _ := json.Marshal(m)
	if m.Submit.Text != "Save edit" || !strings.Contains(string(raw), "saving the edit does not allow it") || strings.Contains(string(raw), "counts as your *Allow*") {
		t.Fatalf("held edit modal %s", raw)
	}
}

// The phrase modal's submission parses to an Allow with the phrase as
// typed (the bot trims it), on the card its metadata names; a submission
// without the card message, with a phrase longer than the input holds,
// or with another input's value, and "Allow…" without a trigger_id, are
// not Airlock's.
func TestParsePhraseSubmission(t *testing.T) {
	ref := "abcdefgh.1"
	msg := CardRef(chanOps, cardTS)
	meta := ModalMeta{Ref: ref, Channel: chanOps, Message: msg}.encode()
	in, err := parseInteraction(mustJSON(phraseSubmission(alice, meta, " prod/<!here> ")))
	if err != nil || in.Kind != cardpkg.ActAllowTyped || !in.Submit || in.Value != " prod/<!here> " || in.Ref != ref || in.Message != msg || in.Channel != chanOps {
		t.Fatalf("phrase submission: %+v %v", in, err)
	}
	if in, err := parseInteraction(mustJSON(blockAction(alice, chanOps, mentionTS, ActionAllowTyped, ref))); err != nil || in.Kind != cardpkg.ActAllowTyped || in.Submit {
		t.Fatalf("Allow…: %+v %v", in, err)
	}
	bad := map[string]map[string]any{
		"no card message": phraseSubmission(alice, ModalMeta{Ref: ref, Channel: chanOps}.encode(), "deploy"),
		"too long":        phraseSubmission(alice, meta, strings.Repeat("x", maxPhraseInput+1)),
		"no ref":          phraseSubmission(alice, `{"channel":"`+chanOps+`","message":"`+msg+`"}`, "deploy"),
	}
	wrongBlock := phraseSubmission(alice, meta, "deploy")
	wrongBlock["view"].(map[string]any)["state"] = map[string]any{"values": map[string]any{EditBlockID: map[string]any{editActionID: map[string]any{"type": "plain_text_input", "value": "deploy"}}}}
	bad["another input"] = wrongBlock
	noTrigger := blockAction(alice, chanOps, mentionTS, ActionAllowTyped, ref)
	delete(noTrigger, "trigger_id")
	bad["Allow… without trigger"] = noTrigger
	for name, p := range bad {
		if in, err := parseInteraction(mustJSON(p)); !errors.Is(err, errBadInteraction) {
			t.Errorf("%s: accepted %+v (err %v)", name, in, err)
		}
	}
}
