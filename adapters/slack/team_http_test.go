package slack

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/confirm"
)

// Guards the workspace check on the HTTP path of the edit modal's
// submission (serveInteraction, before serveEdit answers it with the
// edit's outcome): a signed view_submission of a modal Alice really
// opened on a real card, carrying its genuine private_metadata and new
// arguments but another workspace's team id, is answered with an empty
// 200 (the modal closes, Slack does not retry, no response_action errors)
// and changes nothing: the call still waits with the model's arguments,
// no edit or decision is stored or audited, nothing ran, the card is not
// updated and nobody is told anything. The same submission from the
// installed workspace is then applied (the card shows the edit, the call
// is decided with the new arguments, which the tool runs with), so the
// refusal is the workspace's and not the payload's.
func TestHTTPForeignTeamEditSubmissionChangesNothing(t *testing.T) {
	w := newWorld(t, ModeHTTP)
	w.model.PushCalls(
		tc("call_deploy", "deploy", `{"service":"api"}`),
		tc("call_deploy2", "deploy", `{"service":"db"}`),
	).PushText("Deployed web and db.")
	w.deliverEvent(mention(w.eventID(), chanOps, bob, mentionTS, "", "<@"+botUser+"> deploy api and db"), 0)
	card := w.waitCard(1)
	w.ad.Wait()
	allows := buttonsWith(t, card, ActionAllow)
	if len(allows) != 2 || len(buttonsWith(t, card, ActionEdit)) != 2 {
		t.Fatalf("card buttons %+v, want Allow and Edit… on both calls", cardButtons(t, card))
	}
	first, second := allows[0].Value, allows[1].Value

	// Alice opens the edit form of call 1 in the installed workspace: the
	// modal's real metadata.
	w.deliverInteraction(clickOn(card, alice, ActionEdit, first))
	waitFor(t, "views.open", func() bool { return len(w.fake.callsTo("views.open")) == 1 })
	view := w.fake.callsTo("views.open")[0].JSON["view"].(map[string]any)
	meta, _ := view["private_metadata"].(string)
	if view["callback_id"] != CallbackEdit || !strings.Contains(meta, first) || !strings.Contains(meta, CardRef(chanOps, card.TS)) {
		t.Fatalf("edit modal %v, metadata %q", view["callback_id"], meta)
	}
	w.ad.Wait()
	decisions, rejected := len(w.audit(confirm.AuditDecision)), len(w.audit(confirm.AuditRejectedClick))

	// submit posts a view_submission to the adapter's events endpoint,
	// signed with the signing secret, as Slack does, and returns the
	// HTTP answer.
	submit := func(p map[string]any) (int, string) {
		t.Helper()
		raw, _ := json.Marshal(p)
		return w.post([]byte(url.Values{"payload": {string(raw)}}.Encode()), formHeader(), true, time.Now())
	}

	// The submission, from another workspace.
	const edited = `{"service":"web"}`
	foreign := fromTeam(editSubmission(alice, meta, edited), foreignTeam)
	if tm := foreign["team"].(map[string]any)["id"]; tm != foreignTeam {
		t.Fatalf("the foreign submission's team is %v", tm)
	}
	if code, resp := submit(foreign); code != http.StatusOK || resp != "" {
		t.Errorf("the foreign submission was answered HTTP %d %q, want an empty 200 (the modal closes, no errors)", code, resp)
	}
	w.ad.Wait()

	if n := w.tools["deploy"].runs.Load(); n != 0 {
		t.Fatalf("deploy ran %d times on a foreign submission", n)
	}
	for _, ref := range []string{first, second} {
		if call := w.pendingCall(ref); !call.Open() || call.Edited != nil || len(call.Votes) != 0 {
			t.Errorf("call %d after the foreign submission: state %s, edited %+v, votes %+v; want it waiting, unedited",
				call.Number, call.State.Kind, call.Edited, call.Votes)
		}
	}
	if args := w.pendingCall(first).Args; !strings.Contains(args, `"api"`) || strings.Contains(args, `"web"`) {
		t.Errorf("call 1's arguments are now %s, want the model's", args)
	}
	if n := len(w.audit(confirm.AuditEdited)); n != 0 {
		t.Errorf("%d call_edited audit events from a foreign submission", n)
	}
	if d, r := len(w.audit(confirm.AuditDecision)), len(w.audit(confirm.AuditRejectedClick)); d != decisions || r != rejected {
		t.Errorf("audit: %d decisions (was %d), %d rejected clicks (was %d)", d, decisions, r, rejected)
	}
	if n := len(w.fake.callsTo("chat.update")); n != 0 {
		t.Errorf("the card was updated %d times by a foreign submission", n)
	}
	if n := len(w.fake.callsTo("chat.postEphemeral")); n != 0 {
		t.Errorf("%d ephemeral replies to a foreign submission", n)
	}
	if n := len(w.fake.callsTo("views.open")); n != 1 {
		t.Errorf("%d views opened, want Alice's one", n)
	}
	if n := len(w.model.Requests()); n != 1 {
		t.Errorf("the model got %d requests, want 1", n)
	}
	if n := strings.Count(w.logs.String(), "interaction from another workspace ignored"); n != 1 {
		t.Errorf("%d foreign interactions logged, want 1", n)
	}

	// The control: the same submission from the installed workspace is
	// applied (and counts as Alice's Allow of call 1)...
	if code, resp := submit(editSubmission(alice, meta, edited)); code != http.StatusOK || resp != "" {
		t.Fatalf("the edit was answered HTTP %d %q, want an empty 200 (the modal closes)", code, resp)
	}
	w.waitUpdateOf("the card showing the edit", chanOps, card.TS, func(c apiCall) bool {
		return strings.Contains(blocksText(t, c), "Edited by <@"+alice+">")
	})
	w.ad.Wait()
	if call := w.pendingCall(first); call.Open() || call.Edited == nil || call.Edited.By != alice || !strings.Contains(call.Args, `"web"`) {
		t.Fatalf("call 1 after the edit: state %s, edited %+v, args %s", call.State.Kind, call.Edited, call.Args)
	}
	if n := len(w.audit(confirm.AuditEdited)); n != 1 {
		t.Errorf("%d call_edited audit events, want 1", n)
	}
	if n := w.tools["deploy"].runs.Load(); n != 0 {
		t.Fatalf("deploy ran %d times while call 2 waits", n)
	}

	// ...and Alice's Allow of call 2 runs the batch, call 1 with the
	// edited arguments.
	w.deliverInteraction(clickOn(card, alice, ActionAllow, second))
	w.waitText(chanOps, "Deployed web and db.")
	w.ad.Wait()
	if n := w.tools["deploy"].runs.Load(); n != 2 {
		t.Fatalf("deploy ran %d times, want 2", n)
	}
	var ranWeb bool
	for _, r := range lastToolResults(t, w.model.Requests()[1]) {
		if r.Name == "deploy" && strings.HasPrefix(r.Content, "An approver changed the arguments before running:") && strings.Contains(r.Content, "web") {
			ranWeb = true
		}
	}
	if !ranWeb {
		t.Errorf("the model was not told call 1 ran with the edited arguments: %+v", lastToolResults(t, w.model.Requests()[1]))
	}
	updates := w.updatesOf(chanOps, card.TS)
	if final := updates[len(updates)-1]; !closedCard(t, final, alice) {
		t.Errorf("final card:\n%s", blocksText(t, final))
	}
}
