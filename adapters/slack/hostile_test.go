package slack

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/model"
)

// Tests written as an attacker: another workspace sending events and
// clicks, a model whose words, arguments and answers try to ping, link
// or hide what runs.

// fromTeam rewrites a payload as if it came from another workspace.
func fromTeam(p map[string]any, team string) map[string]any {
	if _, ok := p["team_id"]; ok {
		p["team_id"] = team
	}
	if ev, ok := p["event"].(map[string]any); ok {
		ev["team"] = team
	}
	if auth, ok := p["authorizations"].([]any); ok {
		for _, a := range auth {
			a.(map[string]any)["team_id"] = team
		}
	}
	if t, ok := p["team"].(map[string]any); ok {
		t["id"] = team
	}
	if u, ok := p["user"].(map[string]any); ok {
		u["team_id"] = team
	}
	return p
}

// Events and clicks from another workspace change nothing, in either
// mode, even when they name a real approver and a real button.
func TestForeignWorkspaceChangesNothing(t *testing.T) {
	for _, mode := range []string{ModeSocket, ModeHTTP} {
		t.Run(mode, func(t *testing.T) {
			w := newWorld(t, mode)
			w.model.PushCalls(tc("call_deploy", "deploy", `{"service":"api"}`)).PushText("Deployed.")

			// A mention from another workspace: no turn, nothing posted.
			w.deliverEvent(fromTeam(mention(w.eventID(), chanOps, bob, mentionTS, "", "<@"+botUser+"> deploy"), "T0EVIL"), 0)
			w.deliverEvent(fromTeam(message(w.eventID(), dmBob, "im", bob, "1700000001.000100", "", "deploy"), "T0EVIL"), 0)
			w.ad.Wait()
			if n := len(w.model.Requests()); n != 0 {
				t.Fatalf("a foreign event reached the model (%d requests)", n)
			}
			if n := len(w.fake.callsTo("chat.postMessage")); n != 0 {
				t.Fatalf("a foreign event made %d posts", n)
			}

			// A real card, then Alice's click on it from another workspace.
			w.deliverEvent(mention(w.eventID(), chanOps, bob, mentionTS, "", "<@"+botUser+"> deploy"), 0)
			card := w.waitCard(1)
			w.ad.Wait()
			allow := refByStyle(t, card, "primary")
			decisions := len(w.audit(confirm.AuditDecision))
			w.deliverInteraction(fromTeam(blockAction(alice, chanOps, mentionTS, ActionAllow, allow), "T0EVIL"))
			w.deliverInteraction(fromTeam(blockAction(alice, chanOps, mentionTS, ActionAllowGrant, allow), "T0EVIL"))
			w.deliverInteraction(fromTeam(blockAction(alice, chanOps, mentionTS, ActionRevokeGrant, confirm.GrantRef("abc")), "T0EVIL"))
			w.deliverInteraction(fromTeam(blockAction(alice, chanOps, mentionTS, ActionDenyReason, allow), "T0EVIL"))
			w.deliverInteraction(fromTeam(viewSubmission(alice, ModalMeta{Ref: allow, Channel: chanOps, Thread: mentionTS}.encode(), "no"), "T0EVIL"))
			w.ad.Wait()
			if w.tools["deploy"].runs.Load() != 0 || len(w.fake.callsTo("chat.update")) != 0 || len(w.fake.callsTo("views.open")) != 0 ||
				len(w.fake.callsTo("chat.postEphemeral")) != 0 || len(w.audit(confirm.AuditRejectedClick)) != 0 || len(w.audit(confirm.AuditDecision)) != decisions {
				t.Fatal("a click from another workspace had an effect")
			}
			if !strings.Contains(w.logs.String(), "from another workspace ignored") {
				t.Error("the foreign deliveries were not logged")
			}

			// The same click from the installed workspace works.
			w.allowAndWait(alice, chanOps, mentionTS, allow, "Deployed.")
			if n := w.tools["deploy"].runs.Load(); n != 1 {
				t.Fatalf("deploy ran %d times", n)
			}
		})
	}
}

// The model's intro, read-back and arguments show literally on the card,
// with hidden characters escaped; nothing of them is mrkdwn or reaches
// the notification text; its answer pings nobody.
func TestHostileModelCannotPingOrHide(t *testing.T) {
	w := newWorld(t, ModeSocket)
	evil := "<!channel> <!here> <!subteam^SOPS> <@UALICE> @channel <https://evil.example|docs> *b* :skull: ``` \u202egnp.exe\u200b"
	args, _ := json.Marshal(map[string]string{"service": evil})
	w.model.Push(model.Message{Text: "Approve quickly " + evil, ToolCalls: []confirm.ToolCall{tc("call_deploy", "deploy", string(args))}})
	w.model.PushText("Deployed, thanks " + evil)
	w.deliverEvent(mention(w.eventID(), chanOps, bob, mentionTS, "", "<@"+botUser+"> deploy"), 0)
	card := w.waitCard(1)
	shown, live := readBlocks(t, []byte(card.param("blocks")))
	if bad := liveProblems(live+card.param("text"), shown+card.param("text")); len(bad) != 0 {
		t.Fatalf("the card is live beyond Airlock's entities: %v\nlive:\n%s", bad, live)
	}
	revealed := strings.NewReplacer("\u202e", `\u202e`, "\u200b", `\u200b`).Replace(evil)
	if !strings.Contains(shown, "deploy "+revealed) || !strings.Contains(shown, "Approve quickly "+revealed) {
		t.Errorf("the read-back or the intro does not show as written:\n%s", shown)
	}
	if strings.Contains(card.param("text"), "evil") {
		t.Errorf("model text in the notification: %q", card.param("text"))
	}

	w.deliverInteraction(blockAction(alice, chanOps, mentionTS, ActionAllow, refByStyle(t, card, "primary")))
	answer := w.waitText(chanOps, "Deployed, thanks")
	text := answer.param("text")
	if strings.ContainsAny(text, "<>\u202e\u200b") || !strings.Contains(text, "&lt;!channel&gt; &lt;!here&gt; &lt;!subteam^SOPS&gt; &lt;@UALICE&gt;") {
		t.Fatalf("answer posted as %q", text)
	}
	for _, c := range w.fake.callsTo("chat.postMessage") {
		if c.param("link_names") == "true" || c.param("link_names") == "1" || c.param("parse") == "full" {
			t.Fatalf("a message asks Slack to link names: %v", c.Params)
		}
	}
}

// "Show full arguments" shows them whole and literally, hidden
// characters escaped, to anyone in the channel; nothing is decided.
func TestShowFullArgumentsLiteral(t *testing.T) {
	w := newWorld(t, ModeHTTP)
	long := `{"service":"api","notes":"<!channel> ` + "```" + ` \u202e ` + strings.Repeat("n", 3000) + `"}`
	w.model.PushCalls(tc("call_deploy", "deploy", long))
	w.deliverEvent(mention(w.eventID(), chanOps, bob, mentionTS, "", "<@"+botUser+"> deploy"), 0)
	card := w.waitCard(1)
	if shown := blocksText(t, card); !strings.Contains(shown, "more characters hidden; Show full arguments shows them all.") {
		t.Fatalf("cut arguments not marked:\n%s", shown)
	}
	var ref string
	for _, b := range cardButtons(t, card) {
		if b.ActionID == ActionShowArgs {
			ref = b.Value
		}
	}
	w.deliverInteraction(blockAction(mallory, chanOps, mentionTS, ActionShowArgs, ref))
	waitFor(t, "views.open", func() bool { return len(w.fake.callsTo("views.open")) == 1 })
	raw, _ := json.Marshal(w.fake.callsTo("views.open")[0].JSON["view"].(map[string]any)["blocks"])
	shown, live := readBlocks(t, raw)
	if bad := liveProblems(live, shown); len(bad) != 0 {
		t.Fatalf("the modal is live: %v", bad)
	}
	if !strings.Contains(strings.ReplaceAll(shown, "\n", ""), `"notes": "<!channel> `+"```"+` \u202e `+strings.Repeat("n", 3000)) {
		t.Errorf("the modal does not hold the whole arguments as written:\n%s", shown)
	}
	w.waitNothingChanged("showing arguments decided something")
}
