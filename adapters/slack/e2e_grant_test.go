package slack

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/confirm"
)

// End to end, against the fake Slack with the real client, a real bot on
// real SQLite: quorum, self-approval, and grants with their notice.

// twoForDeploy is a rule asking two approvals for every deploy.
func twoForDeploy(c *bot.Config) {
	c.Policy = confirm.NewPolicy(true, nil, confirm.PolicyFunc(func(r confirm.Request) confirm.Verdict {
		if r.Call.Name != "deploy" {
			return confirm.Verdict{}
		}
		return confirm.Verdict{Ask: true, Approvals: 2, Reasons: []confirm.Reason{{Kind: confirm.ReasonRule, Rule: "prod-deploys"}}}
	}))
	c.GrantFor = time.Hour
}

// buttonsWith returns the buttons of a message with an action id.
func buttonsWith(t *testing.T, c apiCall, actionID string) []button {
	t.Helper()
	var out []button
	for _, b := range cardButtons(t, c) {
		if b.ActionID == actionID {
			out = append(out, b)
		}
	}
	return out
}

// waitUpdates waits for at least n chat.update calls and returns the n-th.
func (w *world) waitUpdates(n int) apiCall {
	w.t.Helper()
	waitFor(w.t, fmt.Sprintf("%d chat.update calls", n), func() bool { return len(w.fake.callsTo("chat.update")) >= n })
	return w.fake.callsTo("chat.update")[n-1]
}

// A call needing two approvals: the first Allow shows "1 of 2 approvals"
// and keeps the buttons; the same approver again is told so and changes
// nothing; a second approver's Allow runs the call once.
func TestQuorumTwoApprovers(t *testing.T) {
	for _, mode := range []string{ModeSocket, ModeHTTP} {
		t.Run(mode, func(t *testing.T) {
			w := newWorldWith(t, mode, twoForDeploy)
			w.model.PushCalls(tc("call_deploy", "deploy", `{"service":"api"}`)).PushText("Deployed after two yeses.")
			card := w.askDeploy()
			if txt := blocksText(t, card); !strings.Contains(txt, "needs 2 approvals: the tool needs approval; rule prod-deploys") ||
				!strings.Contains(txt, "Waiting for a decision: 0 of 2 approvals") {
				t.Fatalf("the card does not say why and how many:\n%s", txt)
			}
			if b := buttonsWith(t, card, ActionAllowGrant); len(b) != 0 {
				t.Fatalf("a call needing two approvals offers a grant: %+v", b)
			}
			allow := refByStyle(t, card, "primary")

			w.deliverInteraction(blockAction(alice, chanOps, mentionTS, ActionAllow, allow))
			mid := w.waitUpdates(1)
			w.ad.Wait()
			txt := blocksText(t, mid)
			if !strings.Contains(txt, "1 of 2 approvals: <@"+alice+">") {
				t.Fatalf("the card does not show the first approval:\n%s", txt)
			}
			if _, live := readBlocks(t, []byte(mid.param("blocks"))); strings.Contains(live, "1 of 2 approvals") {
				t.Error("the progress is mrkdwn, not rich text with a user element")
			}
			if strings.Contains(mid.param("text"), alice) || !strings.Contains(mid.param("text"), "1 of 2 approvals") {
				t.Errorf("notification text %q", mid.param("text"))
			}
			if len(buttonsWith(t, mid, ActionAllow)) != 1 || len(buttonsWith(t, mid, ActionDeny)) != 1 {
				t.Fatalf("the half-approved card lost its buttons: %+v", cardButtons(t, mid))
			}
			if w.tools["deploy"].runs.Load() != 0 || len(w.model.Requests()) != 1 {
				t.Fatal("one of two approvals ran something")
			}

			// Alice again: told privately, nothing changes.
			rejected := len(w.audit(confirm.AuditRejectedClick))
			w.deliverInteraction(blockAction(alice, chanOps, mentionTS, ActionAllow, allow))
			eph := w.waitEphemeral(alice, "You already approved this call; it needs one more approval")
			if eph.param("thread_ts") != mentionTS {
				t.Errorf("ephemeral in thread %q", eph.param("thread_ts"))
			}
			w.ad.Wait()
			if len(w.fake.callsTo("chat.update")) != 1 || w.tools["deploy"].runs.Load() != 0 || len(w.audit(confirm.AuditRejectedClick)) != rejected+1 {
				t.Fatal("a second approval by the same person changed something")
			}
			if strings.Contains(w.logs.String(), "click failed") || !strings.Contains(w.logs.String(), "click changed nothing") {
				t.Error("the repeated approval was not logged as a refusal")
			}

			// Carol (through the group) is the second approver.
			w.allowAndWait(carol, chanOps, mentionTS, allow, "Deployed after two yeses.")
			if n := w.tools["deploy"].runs.Load(); n != 1 {
				t.Fatalf("deploy ran %d times, want 1", n)
			}
			updates := w.fake.callsTo("chat.update")
			final := updates[len(updates)-1]
			if b := cardButtons(t, final); len(b) != 0 {
				t.Errorf("the decided card has buttons: %+v", b)
			}
			if txt := blocksText(t, final); !strings.Contains(txt, "Allowed by <@"+alice+"> and <@"+carol+">") || !strings.Contains(txt, "succeeded") {
				t.Errorf("final card:\n%s", txt)
			}
		})
	}
}

// The requester, even an approver, can't allow their own call: an
// ephemeral says so and nothing changes; another approver can.
func TestSelfApprovalRefused(t *testing.T) {
	w := newWorld(t, ModeSocket)
	w.model.PushCalls(tc("call_deploy", "deploy", `{"service":"api"}`)).PushText("Deployed by someone else's yes.")
	w.deliverEvent(mention(w.eventID(), chanOps, alice, mentionTS, "", "<@"+botUser+"> deploy api"), 0)
	card := w.waitCard(1)
	allow := refByStyle(t, card, "primary")
	w.deliverInteraction(blockAction(alice, chanOps, mentionTS, ActionAllow, allow))
	w.waitEphemeral(alice, "You asked for this call, so you can't allow it yourself")
	w.waitNothingChanged("the requester's own Allow changed something")
	if strings.Contains(w.logs.String(), "click failed") {
		t.Error("a refusal was logged as a failure")
	}
	w.allowAndWait(carol, chanOps, mentionTS, allow, "Deployed by someone else's yes.")
	if n := w.tools["deploy"].runs.Load(); n != 1 {
		t.Fatalf("deploy ran %d times", n)
	}
}

// "Allow for 1h" allows the call and posts a grant notice with Revoke; the
// next call of the tool in the thread runs without a card (a line in the
// thread instead); a non-approver's Revoke changes nothing; an approver's
// Revoke updates the notice, and the next call needs a card again.
func TestGrantAllowForAndRevoke(t *testing.T) {
	for _, mode := range []string{ModeSocket, ModeHTTP} {
		t.Run(mode, func(t *testing.T) {
			w := newWorldWith(t, mode, func(c *bot.Config) { c.GrantFor = time.Hour })
			w.model.PushCalls(tc("call_deploy", "deploy", `{"service":"api"}`)).PushText("Deployed (1).")
			card := w.askDeploy()
			allow := refByStyle(t, card, "primary")
			grants := buttonsWith(t, card, ActionAllowGrant)
			if len(grants) != 1 || grants[0].Value != allow || grants[0].Style != "" {
				t.Fatalf("Allow for buttons %+v, want one without style carrying %q", grants, allow)
			}
			if !strings.Contains(card.param("blocks"), `"text":"Allow for 1h"`) {
				t.Errorf("the grant button is not labelled Allow for 1h: %s", card.param("blocks"))
			}

			w.deliverInteraction(blockAction(alice, chanOps, mentionTS, ActionAllowGrant, allow))
			w.waitText(chanOps, "Deployed (1).")
			w.ad.Wait()
			if n := w.tools["deploy"].runs.Load(); n != 1 {
				t.Fatalf("deploy ran %d times", n)
			}
			notice := w.waitText(chanOps, "granted calls of deploy")
			if notice.param("thread_ts") != mentionTS {
				t.Errorf("grant notice in thread %q", notice.param("thread_ts"))
			}
			if txt := notice.param("text"); strings.Contains(txt, "<") || !strings.Contains(txt, alice+" granted calls of deploy in this thread without a card until") {
				t.Errorf("grant notice text %q", txt)
			}
			shown, live := readBlocks(t, []byte(notice.param("blocks")))
			if !strings.Contains(shown, "<@"+alice+"> granted calls of deploy") || strings.Contains(live, "granted") {
				t.Errorf("grant notice reads %q (live %q)", shown, live)
			}
			revoke := buttonsWith(t, notice, ActionRevokeGrant)
			if len(revoke) != 1 || !strings.HasPrefix(revoke[0].Value, "grant-") || revoke[0].Style == "primary" {
				t.Fatalf("Revoke buttons %+v", revoke)
			}
			ref := revoke[0].Value
			updates := w.fake.callsTo("chat.update")
			if txt := blocksText(t, updates[len(updates)-1]); !strings.Contains(txt, "Allowed by <@"+alice+">") {
				t.Errorf("the card does not say who allowed:\n%s", txt)
			}

			// The next deploy in the thread runs without a card.
			w.model.PushCalls(tc("call_deploy2", "deploy", `{"service":"web"}`)).PushText("Deployed (2).")
			w.deliverEvent(mention(w.eventID(), chanOps, bob, "1700000000.000200", mentionTS, "<@"+botUser+"> deploy web"), 0)
			w.waitText(chanOps, "Deployed (2).")
			w.ad.Wait()
			if n := len(w.cards()); n != 1 {
				t.Fatalf("%d cards: a granted call was carded", n)
			}
			if n := w.tools["deploy"].runs.Load(); n != 2 {
				t.Fatalf("deploy ran %d times, want 2", n)
			}
			line := w.waitText(chanOps, "'s requests until")
			if !strings.Contains(line.param("text"), alice+"'s grant for "+bob+"'s requests") || line.param("thread_ts") != mentionTS {
				t.Errorf("grant use line %q in thread %q", line.param("text"), line.param("thread_ts"))
			}

			// Mallory may not revoke.
			before := len(w.fake.callsTo("chat.update"))
			w.deliverInteraction(blockAction(mallory, chanOps, mentionTS, ActionRevokeGrant, ref))
			w.waitEphemeral(mallory, "can't approve")
			w.ad.Wait()
			if len(w.fake.callsTo("chat.update")) != before || len(w.audit(confirm.AuditGrantRevoked)) != 0 {
				t.Fatal("a non-approver's Revoke changed something")
			}

			// Carol revokes: the notice says so, without the button.
			w.deliverInteraction(blockAction(carol, chanOps, mentionTS, ActionRevokeGrant, ref))
			upd := w.waitUpdates(before + 1)
			w.ad.Wait()
			if upd.param("channel") != chanOps || upd.param("ts") != notice.TS {
				t.Errorf("chat.update of %s/%s, want the notice %s/%s", upd.param("channel"), upd.param("ts"), chanOps, notice.TS)
			}
			if b := cardButtons(t, upd); len(b) != 0 {
				t.Errorf("the revoked notice has buttons: %+v", b)
			}
			if txt := blocksText(t, upd); !strings.Contains(txt, "Revoked by <@"+carol+">") {
				t.Errorf("revoked notice:\n%s", txt)
			}
			if !strings.Contains(upd.param("text"), "Revoked by "+carol) {
				t.Errorf("revoked notice text %q", upd.param("text"))
			}
			if n := len(w.audit(confirm.AuditGrantRevoked)); n != 1 {
				t.Errorf("%d grant_revoked audit events", n)
			}

			// Revoking again changes nothing.
			w.deliverInteraction(blockAction(alice, chanOps, mentionTS, ActionRevokeGrant, ref))
			w.waitEphemeral(alice, "already revoked")
			w.ad.Wait()
			if len(w.fake.callsTo("chat.update")) != before+1 {
				t.Fatal("a second Revoke changed something")
			}

			// The next deploy needs a card again.
			w.model.PushCalls(tc("call_deploy3", "deploy", `{"service":"db"}`)).PushText("Deployed (3).")
			second := w.replyCard(bob, "1700000000.000300", "deploy db", 2)
			if n := w.tools["deploy"].runs.Load(); n != 2 {
				t.Fatalf("deploy ran %d times after the revoke, want 2", n)
			}
			if second.param("thread_ts") != mentionTS || len(buttonsWith(t, second, ActionAllowGrant)) != 1 {
				t.Errorf("second card in %q with buttons %+v", second.param("thread_ts"), cardButtons(t, second))
			}
			if strings.Contains(w.logs.String(), "click failed") {
				t.Error("a refusal was logged as a failure")
			}
		})
	}
}

// A card holding a call a grant allowed names whose grant it was, found
// in storage (here after a restart of the adapter's memory).
func TestCardNamesGrantor(t *testing.T) {
	w := newWorldWith(t, ModeSocket, func(c *bot.Config) {
		c.GrantFor = time.Hour
		c.Policy = confirm.NewPolicy(true, []string{"service_status"})
	})
	w.model.PushCalls(tc("call_deploy", "deploy", `{"service":"api"}`)).PushText("Deployed.")
	w.deliverEvent(mention(w.eventID(), chanOps, bob, mentionTS, "", "<@"+botUser+"> deploy api"), 0)
	allow := refByStyle(t, w.waitCard(1), "primary")
	w.deliverInteraction(blockAction(alice, chanOps, mentionTS, ActionAllowGrant, allow))
	w.waitText(chanOps, "Deployed.")
	w.ad.Wait()
	w.ad.grants.mu.Lock()
	w.ad.grants.who = nil // forget what the notice taught: storage must answer
	w.ad.grants.mu.Unlock()

	// A reply with a granted deploy and a status call that needs a card.
	w.model.PushCalls(tc("call_deploy2", "deploy", `{"service":"web"}`), tc("call_status", "service_status", `{"service":"web"}`)).PushText("Both done.")
	card := w.replyCard(bob, "1700000000.000200", "deploy web and check it", 2)
	txt := blocksText(t, card)
	if !strings.Contains(txt, "Allowed by <@"+alice+">'s grant") {
		t.Fatalf("the card does not name the grantor:\n%s", txt)
	}
	if strings.Contains(card.param("text"), alice) {
		t.Errorf("notification text names people: %q", card.param("text"))
	}
	if w.tools["deploy"].runs.Load() != 1 {
		t.Fatal("the granted call ran before the batch was decided")
	}
	w.deliverInteraction(blockAction(alice, chanOps, mentionTS, ActionAllow, refByStyle(t, card, "primary")))
	w.waitText(chanOps, "Both done.")
	w.ad.Wait()
	if d, s := w.tools["deploy"].runs.Load(), w.tools["service_status"].runs.Load(); d != 2 || s != 1 {
		t.Fatalf("deploy ran %d times, status %d", d, s)
	}
}
