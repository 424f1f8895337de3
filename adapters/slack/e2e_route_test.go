package slack

import (
	"context"
	"encoding/json"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/internal/testkit"
)

// End to end, issue 13 ("Approvals reach the right people"): a real bot
// on a real SQLite file, the scripted model and the fake Slack, with the
// real slack-go client. Cards routed to an approvals channel and to
// approvers' DMs, an edit through the modal, and Extend.

// updatesOf are the chat.update calls of one message, in order.
func (w *world) updatesOf(channel, ts string) []apiCall {
	var out []apiCall
	for _, c := range w.fake.callsTo("chat.update") {
		if c.param("channel") == channel && c.param("ts") == ts {
			out = append(out, c)
		}
	}
	return out
}

// waitUpdateOf waits for an update of a message that satisfies ok and
// returns it.
func (w *world) waitUpdateOf(what, channel, ts string, ok func(apiCall) bool) apiCall {
	w.t.Helper()
	var found apiCall
	waitFor(w.t, what, func() bool {
		for _, c := range w.updatesOf(channel, ts) {
			if ok(c) {
				found = c
				return true
			}
		}
		return false
	})
	return found
}

// cardIn waits for a card posted in a channel and returns it.
func (w *world) cardIn(channel string) apiCall {
	w.t.Helper()
	var found apiCall
	waitFor(w.t, "a card in "+channel, func() bool {
		for _, c := range w.cards() {
			if c.param("channel") == channel {
				found = c
				return true
			}
		}
		return false
	})
	return found
}

// closedCard reports whether a posted or updated card has no buttons and
// says who allowed it.
func closedCard(t *testing.T, c apiCall, by string) bool {
	return len(cardButtons(t, c)) == 0 && strings.Contains(blocksText(t, c), "Allowed by <@"+by+">")
}

// (a) An approvals channel: the card is posted there, at the top level,
// linking back to the conversation; the thread gets a pointer without
// buttons linking to the card. A click on the card there decides; the
// same button claimed from the conversation's channel (no card message
// of the batch there) and a non-approver's click change nothing. The
// card and the pointer are updated to the outcome.
func TestRouteApprovalsChannel(t *testing.T) {
	w := newWorldWith(t, ModeHTTP, func(c *bot.Config) {
		c.Channels = bot.NewChannels([]bot.Channel{
			{Platform: Platform, ID: chanOps, Approvers: []string{alice}, ApproverGroups: []string{groupOps}, ApprovalsChannel: chanApprovals},
			{Platform: Platform, ID: chanApprovals, Approvers: []string{mallory}},
		})
	})
	w.model.PushCalls(tc("call_deploy", "deploy", `{"service":"api"}`)).PushText("Deployed from the approvals channel.")
	w.deliverEvent(mention(w.eventID(), chanOps, bob, mentionTS, "", "<@"+botUser+"> deploy api"), 0)

	card := w.cardIn(chanApprovals)
	if card.param("thread_ts") != "" {
		t.Errorf("card in thread %q of the approvals channel, want a new message", card.param("thread_ts"))
	}
	if txt := blocksText(t, card); !strings.Contains(txt, "[View the conversation]("+permalink(chanOps, mentionTS)+")") {
		t.Errorf("the card does not link to the conversation:\n%s", txt)
	}
	pointer := w.waitText(chanOps, "Waiting for approval in <#"+chanApprovals+">")
	if pointer.param("thread_ts") != mentionTS {
		t.Errorf("pointer in thread %q, want %q", pointer.param("thread_ts"), mentionTS)
	}
	if b := cardButtons(t, pointer); len(b) != 0 {
		t.Errorf("the pointer has buttons: %+v", b)
	}
	if txt := blocksText(t, pointer); !strings.Contains(txt, "[View the card]("+permalink(chanApprovals, card.TS)+")") {
		t.Errorf("the pointer does not link to the card:\n%s", txt)
	}
	w.ad.Wait()
	if n := len(w.cards()); n != 1 {
		t.Fatalf("%d cards posted, want 1 (in the approvals channel only)", n)
	}
	allow := refByStyle(t, card, "primary")

	// The button claimed from the conversation's channel: no card there.
	w.deliverInteraction(onMessage(blockAction(alice, chanOps, mentionTS, ActionAllow, allow), card.TS))
	w.waitEphemeral(alice, "Nothing changed")
	// The approvals channel's own approver is no approver of this card.
	w.deliverInteraction(clickOn(card, mallory, ActionAllow, allow))
	w.waitEphemeral(mallory, "can't approve")
	w.waitNothingChanged("a refused click changed something")

	w.deliverInteraction(clickOn(card, alice, ActionAllow, allow))
	answer := w.waitText(chanOps, "Deployed from the approvals channel.")
	if answer.param("thread_ts") != mentionTS {
		t.Errorf("answer in thread %q", answer.param("thread_ts"))
	}
	w.waitUpdateOf("the card closed", chanApprovals, card.TS, func(c apiCall) bool {
		return closedCard(t, c, alice) && strings.Contains(blocksText(t, c), "succeeded")
	})
	final := w.waitUpdateOf("the pointer at the outcome", chanOps, pointer.TS, func(c apiCall) bool {
		txt := blocksText(t, c)
		return strings.Contains(txt, "closed") && strings.Contains(txt, "Allowed by <@"+alice+">") && strings.Contains(txt, "succeeded")
	})
	w.ad.Wait()
	if b := cardButtons(t, final); len(b) != 0 {
		t.Errorf("the closed pointer has buttons: %+v", b)
	}
	if txt := final.param("text"); strings.Contains(txt, alice) || strings.Contains(txt, "<@") {
		t.Errorf("the pointer's notification text names people: %q", txt)
	}
	if n := w.tools["deploy"].runs.Load(); n != 1 {
		t.Fatalf("deploy ran %d times, want 1", n)
	}
}

// (b) notify: [dm]: the card in the thread and a copy in each approver's
// DM (the group resolved), each linking to the conversation. A click on
// one copy decides; a second click on another copy changes nothing; a
// forged click on a message that is no card of the batch, or by someone
// who is no approver, changes nothing; every copy is updated.
func TestRouteNotifyDM(t *testing.T) {
	w := newWorldWith(t, ModeSocket, func(c *bot.Config) {
		c.Channels = bot.NewChannels([]bot.Channel{
			{Platform: Platform, ID: chanOps, Approvers: []string{alice}, ApproverGroups: []string{groupOps}, Notify: []string{"dm"}},
		})
	})
	w.model.PushCalls(tc("call_deploy", "deploy", `{"service":"api"}`)).PushText("Deployed once.")
	w.deliverEvent(mention(w.eventID(), chanOps, bob, mentionTS, "", "<@"+botUser+"> deploy api"), 0)

	main := w.cardIn(chanOps)
	copyAlice, copyCarol := w.cardIn(dmOf(alice)), w.cardIn(dmOf(carol))
	if main.param("thread_ts") != mentionTS {
		t.Errorf("main card in thread %q", main.param("thread_ts"))
	}
	for _, cp := range []apiCall{copyAlice, copyCarol} {
		if cp.param("thread_ts") != "" {
			t.Errorf("copy in %s in thread %q, want the top of the DM", cp.param("channel"), cp.param("thread_ts"))
		}
		if txt := blocksText(t, cp); !strings.Contains(txt, "A copy of an approval card") || !strings.Contains(txt, "[View the conversation]("+permalink(chanOps, mentionTS)+")") {
			t.Errorf("copy in %s:\n%s", cp.param("channel"), txt)
		}
	}
	w.ad.Wait()
	var opened []string
	for _, c := range w.fake.callsTo("conversations.open") {
		opened = append(opened, c.param("users"))
	}
	if len(w.cards()) != 3 || len(opened) != 2 || !strings.Contains(strings.Join(opened, ","), alice) || !strings.Contains(strings.Join(opened, ","), carol) {
		t.Fatalf("%d cards; DMs opened with %v, want the card and copies for %s and %s", len(w.cards()), opened, alice, carol)
	}
	ref := refByStyle(t, copyAlice, "primary")
	if ref != refByStyle(t, main, "primary") || ref != refByStyle(t, copyCarol, "primary") {
		t.Fatal("the copies carry other references than the card")
	}

	// Forged: the right button on a message that is no card of the batch,
	// and someone who is no approver on a real copy.
	w.deliverInteraction(onMessage(blockAction(alice, dmOf(alice), "", ActionAllow, ref), "1800000000.999999"))
	w.waitEphemeral(alice, "Nothing changed")
	w.deliverInteraction(clickOn(copyAlice, mallory, ActionAllow, ref))
	w.waitEphemeral(mallory, "can't approve")
	w.waitNothingChanged("a forged click changed something")

	w.deliverInteraction(clickOn(copyAlice, alice, ActionAllow, ref))
	w.waitText(chanOps, "Deployed once.")
	for _, m := range []apiCall{main, copyAlice, copyCarol} {
		w.waitUpdateOf("the closed card in "+m.param("channel"), m.param("channel"), m.TS, func(c apiCall) bool { return closedCard(t, c, alice) })
	}
	w.ad.Wait()
	updates := len(w.fake.callsTo("chat.update"))
	decisions := len(w.audit(confirm.AuditDecision))

	// Carol on her copy, after the decision: told so, nothing changes.
	w.deliverInteraction(clickOn(copyCarol, carol, ActionAllow, ref))
	eph := w.waitEphemeral(carol, "already decided")
	if eph.param("channel") != dmOf(carol) {
		t.Errorf("ephemeral in %s", eph.param("channel"))
	}
	w.ad.Wait()
	if n := w.tools["deploy"].runs.Load(); n != 1 {
		t.Fatalf("deploy ran %d times, want 1", n)
	}
	if len(w.fake.callsTo("chat.update")) != updates || len(w.audit(confirm.AuditDecision)) != decisions {
		t.Fatal("a second click on another copy changed something")
	}
}

// (c) Allow with edit: Edit… opens the modal with the arguments; an
// edit that is no JSON, or no valid arguments for the tool, is answered
// in the modal and changes nothing; a valid edit closes it, counts as
// the editor's Allow, runs the call with the new arguments, and the
// model is told; the card shows the edit; the same modal submitted again
// changes nothing.
func TestRouteEditThroughModal(t *testing.T) {
	for _, mode := range []string{ModeHTTP, ModeSocket} {
		t.Run(mode, func(t *testing.T) {
			w := newWorld(t, mode)
			w.model.PushCalls(tc("call_deploy", "deploy", `{"service":"api"}`)).PushText("Deployed web.")
			card := w.askDeploy()
			edits := buttonsWith(t, card, ActionEdit)
			allow := refByStyle(t, card, "primary")
			if len(edits) != 1 || edits[0].Value != allow || edits[0].Style != "" {
				t.Fatalf("Edit… buttons %+v", edits)
			}
			w.ad.Wait()

			// Someone who may not decide gets no form.
			w.deliverInteraction(clickOn(card, mallory, ActionEdit, allow))
			w.waitEphemeral(mallory, "can't approve")
			w.ad.Wait()
			if n := len(w.fake.callsTo("views.open")); n != 0 {
				t.Fatalf("a non-approver got the edit form (%d views)", n)
			}

			w.deliverInteraction(clickOn(card, alice, ActionEdit, allow))
			waitFor(t, "views.open", func() bool { return len(w.fake.callsTo("views.open")) == 1 })
			view := w.fake.callsTo("views.open")[0].JSON["view"].(map[string]any)
			meta, _ := view["private_metadata"].(string)
			if view["callback_id"] != CallbackEdit || !strings.Contains(meta, CardRef(chanOps, card.TS)) {
				t.Fatalf("modal %v, metadata %q", view["callback_id"], meta)
			}
			if js := string(mustJSON(view)); !strings.Contains(js, `\"service\": \"api\"`) || !strings.Contains(js, "Arguments (JSON): submitting allows the call") {
				t.Errorf("the modal does not hold the arguments: %s", js)
			}

			for _, bad := range []string{`{"service": `, `["web"]`} {
				resp := w.submitView(editSubmission(alice, meta, bad))
				var got struct {
					ResponseAction string            `json:"response_action"`
					Errors         map[string]string `json:"errors"`
				}
				if err := json.Unmarshal([]byte(resp), &got); err != nil || got.ResponseAction != "errors" || got.Errors[EditBlockID] == "" {
					t.Fatalf("edit %q answered %q, want the modal's errors", bad, resp)
				}
			}
			w.ad.Wait()
			if w.tools["deploy"].runs.Load() != 0 || len(w.audit(confirm.AuditEdited)) != 0 || len(w.model.Requests()) != 1 || len(w.fake.callsTo("chat.update")) != 0 {
				t.Fatal("a refused edit changed something")
			}

			if resp := w.submitView(editSubmission(alice, meta, "{\n  \"service\": \"web\",\n  \"replicas\": 12\n}")); resp != "" {
				t.Fatalf("the valid edit answered %q, want an empty answer (the modal closes)", resp)
			}
			w.waitText(chanOps, "Deployed web.")
			w.ad.Wait()
			if n := w.tools["deploy"].runs.Load(); n != 1 {
				t.Fatalf("deploy ran %d times", n)
			}
			var ran, want map[string]any
			_ = json.Unmarshal([]byte(w.tools["deploy"].lastArgs()), &ran)
			_ = json.Unmarshal([]byte(`{"service":"web","replicas":12}`), &want)
			if !reflect.DeepEqual(ran, want) {
				t.Errorf("deploy ran with %s, want the edited arguments", w.tools["deploy"].lastArgs())
			}
			var result string
			for _, r := range lastToolResults(t, w.model.Requests()[1]) {
				if r.Name == "deploy" {
					result = r.Content
				}
			}
			if !strings.HasPrefix(result, "An approver changed the arguments before running:") || !strings.Contains(result, "web") {
				t.Errorf("the model was told %q", result)
			}
			if n := len(w.audit(confirm.AuditEdited)); n != 1 {
				t.Errorf("%d call_edited audit events", n)
			}
			updates := w.updatesOf(chanOps, card.TS)
			if len(updates) == 0 {
				t.Fatal("the card was not updated")
			}
			txt := blocksText(t, updates[len(updates)-1])
			testkit.ContainsAll(t, "the card", txt, "Edited by <@"+alice+">", `service: "api" → "web"`, "replicas: (not set) → 12", "Allowed by <@"+alice+">")

			// The same modal again: the call was decided; the modal closes
			// and the editor is told.
			if resp := w.submitView(editSubmission(alice, meta, `{"service":"db"}`)); resp != "" {
				t.Errorf("a late edit answered %q", resp)
			}
			w.waitEphemeral(alice, "already decided")
			w.ad.Wait()
			if w.tools["deploy"].runs.Load() != 1 || len(w.audit(confirm.AuditEdited)) != 1 {
				t.Fatal("a late edit changed something")
			}
		})
	}
}

// expiresAt reads the deadline off a card's footer.
var footerExpiry = regexp.MustCompile(`Expires <!date\^(\d+)\^`)

func expiresAt(t *testing.T, c apiCall) time.Time {
	t.Helper()
	m := footerExpiry.FindStringSubmatch(blocksText(t, c))
	if m == nil {
		t.Fatalf("no deadline on the card:\n%s", blocksText(t, c))
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return time.Unix(n, 0)
}

// (d) Extend: an approver pushes the card's deadline by
// confirmation.timeout, once: the card shows who and the new deadline,
// without Extend; the call does not expire at the old deadline; a second
// Extend is refused and changes nothing.
func TestRouteExtend(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	w := newWorldWith(t, ModeSocket, func(c *bot.Config) { c.Now = clock })
	w.model.PushCalls(tc("call_deploy", "deploy", `{"service":"api"}`)).PushText("Deployed after the extension.")
	card := w.askDeploy()
	ext := buttonsWith(t, card, ActionExtend)
	if len(ext) != 1 || ext[0].Style != "" || !strings.Contains(card.param("blocks"), `"text":"Extend 30m"`) {
		t.Fatalf("Extend buttons %+v", ext)
	}
	before := expiresAt(t, card)
	w.ad.Wait()

	w.deliverInteraction(clickOn(card, mallory, ActionExtend, ext[0].Value))
	w.waitEphemeral(mallory, "can't approve")
	w.ad.Wait()
	if len(w.fake.callsTo("chat.update")) != 0 || len(w.audit(confirm.AuditExtended)) != 0 {
		t.Fatal("a non-approver's Extend changed something")
	}

	w.deliverInteraction(clickOn(card, alice, ActionExtend, ext[0].Value))
	upd := w.waitUpdates(1)
	w.ad.Wait()
	if got := expiresAt(t, upd); !got.Equal(before.Add(30 * time.Minute)) {
		t.Errorf("deadline %v after Extend, want %v", got, before.Add(30*time.Minute))
	}
	if txt := blocksText(t, upd); !strings.Contains(txt, "Extended by <@"+alice+">") {
		t.Errorf("the card does not say who extended it:\n%s", txt)
	}
	if b := buttonsWith(t, upd, ActionExtend); len(b) != 0 {
		t.Errorf("Extend still offered: %+v", b)
	}
	if n := len(w.audit(confirm.AuditExtended)); n != 1 {
		t.Errorf("%d extended audit events", n)
	}

	// Again, from the button still on someone's screen: refused.
	w.deliverInteraction(clickOn(card, carol, ActionExtend, ext[0].Value))
	w.waitEphemeral(carol, bot.UserMessage(bot.ErrAlreadyExtended))
	w.ad.Wait()
	if len(w.fake.callsTo("chat.update")) != 1 || len(w.audit(confirm.AuditExtended)) != 1 {
		t.Fatal("a second Extend changed something")
	}

	// Past the old deadline the call still waits; it can be allowed.
	now.Add(int64(31 * time.Minute))
	if err := w.bot.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	w.ad.Wait()
	w.deliverInteraction(clickOn(card, alice, ActionAllow, refByStyle(t, card, "primary")))
	w.waitText(chanOps, "Deployed after the extension.")
	w.ad.Wait()
	if n := w.tools["deploy"].runs.Load(); n != 1 {
		t.Fatalf("deploy ran %d times after the extension, want 1", n)
	}
}
