package surfacetest

import (
	"strings"
	"testing"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/model"
)

var cases = []testCase{
	{name: "PausedReplyAndItsCard", run: pausedReplyAndItsCard},
	{name: "Allow", run: allow},
	{name: "DenyWithReason", run: denyWithReason},
	{name: "Quorum", needs: []Capability{SecondApprover}, run: quorum},
	{name: "Edit", run: edit},
	{name: "AllowAll", run: allowAll},
	{name: "TypedPhrase", run: typedPhrase},
	{name: "Preview", run: preview},
	{name: "RunMessage", run: runMessage},
	{name: "StaleClick", run: staleClick},
	{name: "StrangersClick", needs: []Capability{Strangers}, run: strangersClick},
	{name: "RequesterWithdraws", needs: []Capability{SeparateRequester}, run: requesterWithdraws},
}

// The model's reply pauses on a call that needs approval: the card names
// every call, what it does and its arguments exactly, who asked, and the
// agent's words; nothing runs and the model is not asked again.
func pausedReplyAndItsCard(t *testing.T, d Driver) {
	w := newWorld(t, d, nil)
	w.pushDeploy("Deployed api.")
	w.s.Ask("deploy api please")
	text := w.card(1)
	wants := []string{intro, "status", "Read the status of api", "deploy", "Deploy api to production", w.s.Name(Requester),
		"runs with the batch (no approval needed)", "waiting for a decision"}
	wants = append(wants, argLines(statusArgs)...)
	wants = append(wants, argLines(deployArgs)...)
	if missing := lacks(text, wants); len(missing) != 0 {
		t.Fatalf("the card lacks %q:\n%s", missing, text)
	}
	w.s.Settle()
	if n := len(w.s.Cards()); n != 1 {
		t.Errorf("%d cards, want 1", n)
	}
	reqs := w.model.Requests()
	if len(reqs) != 1 {
		t.Fatalf("the model was asked %d times, want once", len(reqs))
	}
	if last := reqs[0].Messages[len(reqs[0].Messages)-1]; last.Role != model.RoleUser || last.Text != "deploy api please" {
		t.Errorf("the model was asked %q (%s), want the requester's words alone", last.Text, last.Role)
	}
	if r := append(w.status.ran(), w.deploy.ran()...); len(r) != 0 {
		t.Errorf("ran before any decision: %q", r)
	}
	if p := w.s.Posts(); len(p) != 0 {
		t.Errorf("posted besides the card: %q", p)
	}
	if _, ok := w.lacks[EditsCards]; !ok {
		// What noButtons later sees go.
		b := strings.Join(w.s.Buttons(1), "|")
		if !strings.Contains(b, "Allow") || !strings.Contains(b, "Deny") {
			t.Errorf("the waiting card's buttons: %q", w.s.Buttons(1))
		}
	}
}

// An approver's Allow runs the batch once, tells the model what the
// calls did, and the card says who allowed.
func allow(t *testing.T, d Driver) {
	w := newWorld(t, d, nil)
	w.pushDeploy("Deployed api.")
	w.s.Ask("deploy api")
	w.card(1)
	w.s.Press(Approver, 1, 2, Allow, "")
	w.answer("Deployed api.")
	w.s.Settle()
	w.ranOnce(w.deploy, deployArgs)
	w.ranOnce(w.status, statusArgs)
	if got := w.told("deploy"); !strings.Contains(got, "done: Deploy api to production") {
		t.Errorf("the model was told %q of deploy", got)
	}
	if n := len(w.model.Requests()); n != 2 {
		t.Errorf("the model was asked %d times, want 2", n)
	}
	w.cardSays(1, "allowed by "+w.s.Name(Approver), "succeeded")
	w.noButtons(1)
	w.decisionsAudited(Approver, "allowed")
}

// Deny with a reason: the tool does not run, the model is told the
// reason, and the card shows who denied and why (an approver's deny reads
// "denied" even when they asked, as on the terminal, not "withdrawn").
func denyWithReason(t *testing.T, d Driver) {
	const reason = "change freeze until Monday"
	w := newWorld(t, d, nil)
	w.pushDeploy("Not deployed: there is a freeze.")
	w.s.Ask("deploy api")
	w.card(1)
	w.s.Press(Approver, 1, 2, DenyReason, reason)
	w.answer("Not deployed")
	w.s.Settle()
	if r := w.deploy.ran(); len(r) != 0 {
		t.Fatalf("the denied call ran: %q", r)
	}
	if got := w.told("deploy"); !strings.Contains(got, reason) {
		t.Errorf("the model was told %q of deploy, without the reason", got)
	}
	text := w.cardSays(1, "denied by "+w.s.Name(Approver), "not run", reason)
	shown := strings.Join(append(append([]string{text}, w.s.Posts()...), w.s.Notices(Approver)...), "\n")
	if strings.Contains(strings.ToLower(shown), "withdrawn") {
		t.Errorf("an approver's deny reads as withdrawn:\n%s", shown)
	}
	w.decisionsAudited(Approver, "denied")
}

// twoApprovals asks two different people to allow each deploy.
func twoApprovals(c *bot.Config) {
	c.Policy = confirm.NewPolicy(true, nil, confirm.PolicyFunc(func(r confirm.Request) confirm.Verdict {
		if r.Call.Name != "deploy" {
			return confirm.Verdict{}
		}
		return confirm.Verdict{Ask: true, Approvals: 2}
	}))
}

// A call needing two approvals: one Allow counts and shows, runs
// nothing; a second approver's Allow runs it once, and the card names
// both.
func quorum(t *testing.T, d Driver) {
	w := newWorld(t, d, twoApprovals)
	w.pushDeploy("Deployed api.")
	w.s.Ask("deploy api")
	w.cardSays(1, "0 of 2")
	w.s.Press(Approver, 1, 2, Allow, "")
	w.cardSays(1, "1 of 2", w.s.Name(Approver))
	w.s.Settle()
	if r := append(w.status.ran(), w.deploy.ran()...); len(r) != 0 {
		t.Errorf("one approval of two ran %q", r)
	}
	if n, p := len(w.model.Requests()), w.s.Posts(); n != 1 || len(p) != 0 {
		t.Errorf("after one approval of two the model was asked %d times, posts %q", n, p)
	}
	if got := w.s.Notices(Approver); len(got) != 0 {
		t.Errorf("the first approval was told %q", got)
	}

	w.s.Press(Approver2, 1, 2, Allow, "")
	w.answer("Deployed api.")
	w.s.Settle()
	w.ranOnce(w.deploy, deployArgs)
	if got := w.told("deploy"); !strings.Contains(got, "done: Deploy api to production") {
		t.Errorf("the model was told %q of deploy", got)
	}
	w.cardSays(1, "allowed by", w.s.Name(Approver), w.s.Name(Approver2))
}

// Edit: the call runs with the arguments the approver wrote, the card
// shows them, and the model is told what ran.
func edit(t *testing.T, d Driver) {
	const edited = `{"service":"web","environment":"staging"}`
	w := newWorld(t, d, nil)
	w.pushDeploy("Deployed web.")
	w.s.Ask("deploy api")
	w.card(1)
	w.s.Press(Approver, 1, 2, Edit, edited)
	w.answer("Deployed web.")
	w.s.Settle()
	w.ranOnce(w.deploy, edited)
	if got := w.told("deploy"); !strings.Contains(got, "done: Deploy web to staging") {
		t.Errorf("the model was told %q of deploy", got)
	}
	w.cardSays(1, "Deploy web to staging", `"web"`, `"staging"`, "edited by "+w.s.Name(Approver))
}

// Allow all allows every waiting call in one click: each runs once.
func allowAll(t *testing.T, d Driver) {
	const api, web = `{"service":"api","environment":"production"}`, `{"service":"web","environment":"production"}`
	w := newWorld(t, d, nil)
	w.model.Push(model.Message{Text: "Deploying both.", ToolCalls: []confirm.ToolCall{tc("c1", "deploy", api), tc("c2", "deploy", web)}})
	w.model.PushText("Deployed both.")
	w.s.Ask("deploy api and web")
	w.card(1)
	if got := w.notice(Approver, func() { w.s.Press(Approver, 1, 0, AllowAll, "") }); !strings.Contains(got, "Allowed 2 calls.") {
		t.Errorf("Allow all told %q", got)
	}
	w.answer("Deployed both.")
	w.s.Settle()
	r := w.deploy.ran()
	if len(r) != 2 || !(sameJSON(r[0], api) && sameJSON(r[1], web) || sameJSON(r[0], web) && sameJSON(r[1], api)) {
		t.Fatalf("deploy ran with %q, want once each with %s and %s", r, api, web)
	}
	got := w.told("deploy")
	if !strings.Contains(got, "Deploy api to production") || !strings.Contains(got, "Deploy web to production") {
		t.Errorf("the model was told %q", got)
	}
	text := w.cardSays(1, "allowed by "+w.s.Name(Approver))
	if n := strings.Count(strings.ToLower(text), "allowed by "+strings.ToLower(w.s.Name(Approver))); n < 2 {
		t.Errorf("the card names the approver for %d calls, want both:\n%s", n, text)
	}
}

// critical rates every deploy critical: allowing it needs its phrase.
func critical(c *bot.Config) {
	c.Policy = confirm.NewPolicy(true, nil, confirm.PolicyFunc(func(r confirm.Request) confirm.Verdict {
		if r.Call.Name != "deploy" {
			return confirm.Verdict{}
		}
		return confirm.Verdict{Ask: true, Risk: confirm.RiskCritical}
	}))
}

// A critical call: a wrong phrase is told and changes nothing; the right
// one (the tool's name) allows it.
func typedPhrase(t *testing.T, d Driver) {
	w := newWorld(t, d, critical)
	w.pushDeploy("Deployed api.")
	w.s.Ask("deploy api")
	w.cardSays(1, "critical")
	w.s.Settle()
	before := w.look()
	if got := w.notice(Approver, func() { w.s.Press(Approver, 1, 2, AllowTyped, "Deploy") }); !strings.Contains(got, "doesn't match") {
		t.Errorf("a wrong phrase was told %q", got)
	}
	w.unchanged("a wrong phrase", before)
	w.s.Press(Approver, 1, 2, AllowTyped, "deploy")
	w.answer("Deployed api.")
	w.s.Settle()
	w.ranOnce(w.deploy, deployArgs)
	w.cardSays(1, "allowed by "+w.s.Name(Approver))
}

// A tool that previews its calls: the card says the preview runs, an
// Allow meanwhile is told and changes nothing; the preview shows on the
// card; an Allow then runs the call once.
func preview(t *testing.T, d Driver) {
	const args = `{"path":"web.yaml"}`
	w := newWorld(t, d, nil)
	w.model.Push(model.Message{Text: "I'll apply web.yaml.", ToolCalls: []confirm.ToolCall{tc("c1", "apply", args)}})
	w.model.PushText("Applied.")
	w.s.Ask("apply web")
	w.cardSays(1, "preview running")
	w.s.Settle()
	before := w.look()
	if got := w.notice(Approver, func() { w.s.Press(Approver, 1, 1, Allow, "") }); !strings.Contains(strings.ToLower(got), "preview") {
		t.Errorf("an Allow while the preview runs was told %q", got)
	}
	w.unchanged("an Allow while the preview runs", before)
	close(w.apply.previewGo)
	w.cardSays(1, "-  replicas: 2", "+  replicas: 20")
	w.s.Press(Approver, 1, 1, Allow, "")
	w.answer("Applied.")
	w.s.Settle()
	w.ranOnce(w.apply, args)
	if got := w.told("apply"); !strings.Contains(got, "done: Apply web.yaml") {
		t.Errorf("the model was told %q of apply", got)
	}
}

// A runbook's run message lists its steps and their statuses; its gated
// step waits on a card; allowed, the run goes on to its end. The model
// is never asked.
func runMessage(t *testing.T, d Driver) {
	w := newWorld(t, d, nil)
	w.s.StartRun("restart service=api")
	w.runSays("Runbook restart", "- before (status): succeeded", "- roll (deploy): needs approval", "- after (status): waiting", ": running")
	w.cardSays(1, "roll", "deploy", "Deploy api to production")
	w.s.Press(Approver, 1, 1, Allow, "")
	w.runSays("- roll (deploy): succeeded", "- after (status): succeeded", ": succeeded")
	w.bot.Runbooks().Wait()
	w.s.Settle()
	w.ranOnce(w.deploy, deployArgs)
	if n := len(w.status.ran()); n != 2 {
		t.Errorf("status ran %d times, want 2", n)
	}
	if n := len(w.model.Requests()); n != 0 {
		t.Errorf("the model was asked %d times", n)
	}
	if n := len(w.s.Runs()); n != 1 {
		t.Errorf("%d run messages, want 1", n)
	}
}

// runSays waits until the first run message shows every piece of wants.
func (w *world) runSays(wants ...string) string {
	w.t.Helper()
	w.eventually("a run message", func() bool { return len(w.s.Runs()) > 0 })
	var text string
	w.eventually("the run message to show "+strings.Join(wants, ", "), func() bool {
		text = w.s.Runs()[0]
		return len(lacks(text, wants)) == 0
	})
	return text
}

// A second click on a decided call is answered and changes nothing.
func staleClick(t *testing.T, d Driver) {
	w := newWorld(t, d, nil)
	w.pushDeploy("Deployed api.")
	w.s.Ask("deploy api")
	w.card(1)
	w.s.Press(Approver, 1, 2, Allow, "")
	w.answer("Deployed api.")
	w.cardSays(1, "allowed by "+w.s.Name(Approver))
	w.s.Settle()
	before := w.look()
	if got := w.notice(Approver, func() { w.s.Press(Approver, 1, 2, Allow, "") }); strings.TrimSpace(got) == "" {
		t.Error("the stale click was answered with nothing")
	}
	w.unchanged("a second click on a decided call", before)
	w.ranOnce(w.deploy, deployArgs)
}

// Someone who is no approver: refused, told so (and nobody else), the
// refusal audited, nothing runs or changes; the approver's click then
// runs the batch once and the model answers in the conversation.
func strangersClick(t *testing.T, d Driver) {
	w := newWorld(t, d, nil)
	w.pushDeploy("Deployed api.")
	w.s.Ask("deploy api please")
	w.card(1)
	w.s.Settle()
	if reqs := w.model.Requests(); len(reqs) != 1 || reqs[0].Messages[len(reqs[0].Messages)-1].Text != "deploy api please" {
		t.Fatalf("the model was asked %d times, last with %+v; want once, with the requester's words alone", len(reqs), reqs)
	}
	if r := append(w.status.ran(), w.deploy.ran()...); len(r) != 0 {
		t.Fatalf("ran before any decision: %q", r)
	}
	before := w.look()
	if got := w.notice(Stranger, func() { w.s.Press(Stranger, 1, 2, Allow, "") }); !strings.Contains(got, "can't approve") {
		t.Errorf("the stranger was told %q", got)
	}
	w.unchanged("a stranger's Allow", before)
	if n := len(w.s.Notices(Approver)) + len(w.s.Notices(Requester)); n != 0 {
		t.Errorf("others were told of the stranger's click: %q %q", w.s.Notices(Approver), w.s.Notices(Requester))
	}
	if rej := w.audited(confirm.AuditRejectedClick); len(rej) != 1 || rej[0].Actor != w.places.Users[Stranger] {
		t.Errorf("rejected clicks audited: %+v, want the stranger's", rej)
	}
	w.s.Press(Approver, 1, 2, Allow, "")
	w.answer("Deployed api.")
	w.s.Settle()
	w.ranOnce(w.deploy, deployArgs)
	w.ranOnce(w.status, statusArgs)
	if n := len(w.model.Requests()); n != 2 {
		t.Errorf("the model was asked %d times, want 2", n)
	}
	w.cardSays(1, "allowed by "+w.s.Name(Approver), "succeeded")
	w.noButtons(1)
}

// The requester, who is no approver, may not allow their own call but may
// withdraw it: it does not run, the card says so, and a later Allow on it
// is answered and changes nothing.
func requesterWithdraws(t *testing.T, d Driver) {
	w := newWorld(t, d, nil)
	w.pushDeploy("Withdrawn, not deploying.")
	w.s.Ask("deploy api")
	w.card(1)
	w.s.Settle()
	before := w.look()
	if got := w.notice(Requester, func() { w.s.Press(Requester, 1, 2, Allow, "") }); !strings.Contains(got, "can't approve") {
		t.Errorf("the requester's Allow was told %q", got)
	}
	w.unchanged("the requester's Allow", before)
	w.s.Press(Requester, 1, 2, Deny, "")
	w.answer("Withdrawn, not deploying.")
	w.cardSays(1, "withdrawn by", w.s.Name(Requester), "not run")
	w.s.Settle()
	if r := w.deploy.ran(); len(r) != 0 {
		t.Fatalf("the withdrawn call ran: %q", r)
	}
	before = w.look()
	if got := w.notice(Approver, func() { w.s.Press(Approver, 1, 2, Allow, "") }); !strings.Contains(got, "already decided") {
		t.Errorf("an Allow on the withdrawn call was told %q", got)
	}
	w.unchanged("an Allow on a withdrawn call", before)
}
