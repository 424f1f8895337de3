package slack

import (
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/confirm"
)

// End to end over the real Slack adapter against the fake Slack: a yes
// counts only for what its giver saw and may approve.

// prodForAlice: deploys to production may be decided by Alice only (a
// rule with `approvers: [UALICE]`) and need two approvals; other deploys
// need one, from any approver of #ops.
func prodForAlice(twoForProd bool) func(c *bot.Config) {
	return func(c *bot.Config) {
		c.Policy = confirm.NewPolicy(true, nil, confirm.PolicyFunc(func(r confirm.Request) confirm.Verdict {
			if r.Call.Name != "deploy" || !strings.Contains(string(r.Call.Args), "production") {
				return confirm.Verdict{}
			}
			v := confirm.Verdict{Ask: true, Reasons: []confirm.Reason{{Kind: confirm.ReasonRule, Rule: "prod"}}}
			if twoForProd {
				v.Approvals = 2
			} else {
				v.Restrict = []confirm.Approvers{{Users: []string{alice}}}
			}
			return v
		}))
		c.GrantFor = time.Hour
	}
}

// Carol, an approver of #ops but not admitted for production, allows a
// staging deploy for an hour: the model's next deploy, to production,
// gets a card and does not run.
func TestE2EGrantNeverWidensWhoApproves(t *testing.T) {
	w := newWorldWith(t, ModeHTTP, prodForAlice(false))
	w.model.PushCalls(tc("call_1", "deploy", `{"env":"staging"}`)).PushText("Staged.")
	w.deliverEvent(mention(w.eventID(), chanOps, bob, mentionTS, "", "<@"+botUser+"> deploy staging"), 0)
	card := w.waitCard(1)
	w.deliverInteraction(blockAction(carol, chanOps, mentionTS, ActionAllowGrant, refByStyle(t, card, "primary")))
	w.waitText(chanOps, "Staged.")
	w.waitText(chanOps, "granted calls of deploy")
	w.ad.Wait()

	w.model.PushCalls(tc("call_2", "deploy", `{"env":"production"}`)).PushText("Production done.")
	prod := w.replyCard(bob, "1700000000.000200", "now production", 2)
	if n := w.tools["deploy"].runs.Load(); n != 1 {
		t.Fatalf("deploy ran %d times: the staging grant covered production", n)
	}
	for _, c := range w.texts(chanOps) {
		if strings.Contains(c.param("text"), "allowed by") {
			t.Fatalf("the thread says a grant allowed production: %q", c.param("text"))
		}
	}
	allow := refByStyle(t, prod, "primary")
	w.deliverInteraction(blockAction(carol, chanOps, mentionTS, ActionAllow, allow))
	w.waitEphemeral(carol, "can't approve")
	w.allowAndWait(alice, chanOps, mentionTS, allow, "Production done.")
	if n := w.tools["deploy"].runs.Load(); n != 2 {
		t.Fatalf("deploy ran %d times after Alice's allow, want 2", n)
	}
}

// Alice's grant for Bob's request covers Bob's next deploy, not
// Mallory's, who mentions the bot in the same thread with arguments of
// her own: hers gets a card.
func TestE2EGrantCoversOnlyItsRequester(t *testing.T) {
	w := newWorldWith(t, ModeSocket, func(c *bot.Config) { c.GrantFor = time.Hour })
	w.model.PushCalls(tc("call_1", "deploy", `{"service":"api"}`)).PushText("Deployed (1).")
	card := w.askDeploy()
	w.deliverInteraction(blockAction(alice, chanOps, mentionTS, ActionAllowGrant, refByStyle(t, card, "primary")))
	notice := w.waitText(chanOps, "granted calls of deploy")
	if txt := notice.param("text"); !strings.Contains(txt, "for requests by "+bob+" or an approver of this channel") {
		t.Errorf("the grant notice does not say whom it covers: %q", txt)
	}
	w.waitText(chanOps, "Deployed (1).")
	w.ad.Wait()

	w.model.PushCalls(tc("call_2", "deploy", `{"service":"everything","force":true}`))
	hers := w.replyCard(mallory, "1700000000.000200", "deploy everything", 2)
	if n := w.tools["deploy"].runs.Load(); n != 1 {
		t.Fatalf("deploy ran %d times: Bob's grant covered Mallory's turn", n)
	}
	w.model.PushText("Not deployed.")
	w.deliverInteraction(clickOn(hers, alice, ActionDeny, refByStyle(t, hers, "danger")))
	w.waitText(chanOps, "Not deployed.")
	w.ad.Wait()

	// Bob's own next deploy is covered.
	w.model.PushCalls(tc("call_3", "deploy", `{"service":"web"}`)).PushText("Deployed (3).")
	w.deliverEvent(mention(w.eventID(), chanOps, bob, "1700000000.000300", mentionTS, "<@"+botUser+"> deploy web"), 0)
	w.waitText(chanOps, "Deployed (3).")
	w.ad.Wait()
	if n := len(w.cards()); n != 2 || w.tools["deploy"].runs.Load() != 2 {
		t.Fatalf("%d cards, %d runs: Bob's own turn was not covered", n, w.tools["deploy"].runs.Load())
	}
}

// Carol edits a staging deploy into production (two approvals needed):
// her edit is one approval. Alice's Allow, clicked on the card she still
// had open showing staging, changes nothing: she is told the arguments
// changed and the card is rendered again; her Allow on the updated card
// is the second approval.
func TestE2EStaleAllowAfterAnEdit(t *testing.T) {
	for _, mode := range []string{ModeHTTP, ModeSocket} {
		t.Run(mode, func(t *testing.T) {
			w := newWorldWith(t, mode, prodForAlice(true))
			w.tools["deploy"].confirm = true
			w.model.PushCalls(tc("call_1", "deploy", `{"env":"staging"}`)).PushText("Deployed.")
			w.deliverEvent(mention(w.eventID(), chanOps, bob, mentionTS, "", "<@"+botUser+"> deploy"), 0)
			card := w.waitCard(1)
			old := refByStyle(t, card, "primary")
			w.ad.Wait()

			w.deliverInteraction(clickOn(card, carol, ActionEdit, old))
			waitFor(t, "views.open", func() bool { return len(w.fake.callsTo("views.open")) == 1 })
			meta, _ := w.fake.callsTo("views.open")[0].JSON["view"].(map[string]any)["private_metadata"].(string)
			if resp := w.submitView(editSubmission(carol, meta, `{"env":"production"}`)); resp != "" {
				t.Fatalf("the edit was answered %q", resp)
			}
			edited := w.waitUpdateOf("the card showing the edit", chanOps, card.TS, func(c apiCall) bool {
				return strings.Contains(blocksText(t, c), "Edited by <@"+carol+">")
			})
			w.ad.Wait()
			fresh := refByStyle(t, edited, "primary")
			if fresh == old {
				t.Fatalf("the edited card's Allow carries the old reference %q", old)
			}
			updates := len(w.updatesOf(chanOps, card.TS))

			w.deliverInteraction(clickOn(card, alice, ActionAllow, old))
			w.waitEphemeral(alice, "The arguments changed since you looked — see the updated card. Nothing changed.")
			w.waitUpdateOf("the card rendered again", chanOps, card.TS, func(c apiCall) bool {
				return len(w.updatesOf(chanOps, card.TS)) > updates
			})
			w.ad.Wait()
			if n := w.tools["deploy"].runs.Load(); n != 0 {
				t.Fatalf("production ran %d times on Alice's yes to staging", n)
			}
			if call := w.pendingCall(fresh); !call.Open() || len(call.Votes) != 1 || call.Votes[0].By != carol {
				t.Fatalf("after the stale allow: open %v, votes %+v; want Carol's edit only", call.Open(), call.Votes)
			}
			// Show full arguments and Deny with a reason, from the old card: refused too.
			w.deliverInteraction(clickOn(card, alice, ActionDeny, old))
			waitFor(t, "a second stale refusal", func() bool {
				n := 0
				for _, c := range w.ephemerals(alice) {
					if strings.Contains(c.param("text"), "arguments changed since you looked") {
						n++
					}
				}
				return n == 2
			})
			w.ad.Wait()
			if call := w.pendingCall(fresh); !call.Open() {
				t.Fatal("a deny from before the edit decided the call")
			}

			w.deliverInteraction(clickOn(card, alice, ActionAllow, fresh))
			w.waitText(chanOps, "Deployed.")
			w.ad.Wait()
			if n := w.tools["deploy"].runs.Load(); n != 1 || !strings.Contains(w.tools["deploy"].lastArgs(), "production") {
				t.Fatalf("deploy ran %d times with %s", n, w.tools["deploy"].lastArgs())
			}
			// Alice's two stale clicks within a minute are one audit row
			// (rejected clicks are coalesced per person, batch and reason).
			if n := len(w.audit(confirm.AuditRejectedClick)); n != 1 || !strings.Contains(w.audit(confirm.AuditRejectedClick)[0].Detail, "stale revision") {
				t.Errorf("%d rejected clicks audited, want one for the stale ones", n)
			}
		})
	}
}
