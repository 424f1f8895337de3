package slack

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/bot"
	cardpkg "github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
)

// End to end, against the fake Slack with the real client, a real bot on
// real SQLite: deliveries from another workspace (the edit modal's
// submission, answered on its own path, and a click), and
// the card of a call a grant allowed when the adapter that shows it can
// neither remember the grant's notice nor ask storage who granted it.

// foreignTeam is a workspace Airlock is not installed in.
const foreignTeam = "T0ELSEWHERE"

// pendingCall is the call of the thread's waiting card with a reference,
// as storage holds it (through the real bot).
func (w *world) pendingCall(ref string) *cardpkg.Call {
	w.t.Helper()
	c, err := w.bot.PendingCard(context.Background(), bot.Thread{Platform: Platform, Channel: chanOps, Thread: mentionTS})
	if err != nil {
		w.t.Fatalf("the thread's pending card: %v", err)
	}
	// The call at ref's position, whatever revision its arguments are at now.
	id, pos, _ := confirm.ParseRef(ref)
	for i := range c.Calls {
		if cid, cpos, _ := confirm.ParseRef(c.Calls[i].Ref); cid == id && cpos == pos {
			return &c.Calls[i]
		}
	}
	w.t.Fatalf("no call %s on the pending card", ref)
	return nil
}

// Guards the workspace check on both paths of an edit modal's submission
// (answered with the edit's outcome, apart from other interactions) and
// of a click, over Socket Mode and over HTTP: a submission of a modal
// Alice really opened on a real card (its genuine metadata) and her Allow
// click, both carrying another workspace's team id, are acknowledged
// (an empty answer: the modal closes, Slack does not retry) and change
// nothing: the calls still wait, nothing ran, the arguments are the
// model's, no edit or decision is stored or audited, the card is not
// updated and nobody is told anything. The same submission and click from
// the installed workspace then do take effect (the tool runs with the
// edited arguments), so the refusal is the workspace's and not the
// payloads'.
func TestForeignTeamEditAndClickChangeNothing(t *testing.T) {
	for _, mode := range []string{ModeSocket, ModeHTTP} {
		t.Run(mode, func(t *testing.T) { foreignTeamEditAndClick(t, mode) })
	}
}

func foreignTeamEditAndClick(t *testing.T, mode string) {
	w := newWorld(t, mode)
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

	// The submission and a click on call 2, from another workspace.
	const edited = `{"service":"web"}`
	foreign := fromTeam(editSubmission(alice, meta, edited), foreignTeam)
	if tm := foreign["team"].(map[string]any)["id"]; tm != foreignTeam {
		t.Fatalf("the foreign submission's team is %v", tm)
	}
	if resp := w.submitView(foreign); resp != "" {
		t.Errorf("the foreign submission was answered %q, want an empty answer", resp)
	}
	w.deliverInteraction(fromTeam(clickOn(card, alice, ActionAllow, second), foreignTeam))
	w.ad.Wait()

	if n := w.tools["deploy"].runs.Load(); n != 0 {
		t.Fatalf("deploy ran %d times on foreign deliveries", n)
	}
	for _, ref := range []string{first, second} {
		if call := w.pendingCall(ref); !call.Open() || call.Edited != nil || len(call.Votes) != 0 {
			t.Errorf("call %d after foreign deliveries: state %s, edited %+v, votes %+v; want it waiting, unedited",
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
		t.Errorf("the card was updated %d times by foreign deliveries", n)
	}
	if n := len(w.fake.callsTo("chat.postEphemeral")); n != 0 {
		t.Errorf("%d ephemeral replies to foreign deliveries", n)
	}
	if n := len(w.fake.callsTo("views.open")); n != 1 {
		t.Errorf("%d views opened, want Alice's one", n)
	}
	if n := len(w.model.Requests()); n != 1 {
		t.Errorf("the model got %d requests, want 1", n)
	}
	if n := strings.Count(w.logs.String(), "interaction from another workspace ignored"); n != 2 {
		t.Errorf("%d foreign interactions logged, want 2", n)
	}

	// The control: the same submission from the installed workspace is
	// applied (and counts as Alice's Allow of call 1)...
	if resp := w.submitView(editSubmission(alice, meta, edited)); resp != "" {
		t.Fatalf("the edit was answered %q, want an empty answer (the modal closes)", resp)
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

	// ...and the same click allows call 2: the batch runs, call 1 with the
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

// eventsOnly is a store that only records events: an adapter given it
// cannot ask storage who granted a grant (it has no Grant method).
type eventsOnly struct{ EventStore }

// replica is a second Airlock process on the world's database: its own
// bot and its own adapter, in http mode (its own events URL) against the
// same fake Slack, sharing the model and the tools. Its adapter's store
// is store.
func (w *world) replica(store EventStore, edit func(*bot.Config)) *world {
	t := w.t
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	logger := slog.New(slog.NewTextHandler(w.logs, &slog.HandlerOptions{Level: slog.LevelDebug})).With("replica", "b")
	cfg := bot.Config{
		Store:    w.db,
		Model:    w.model,
		Tools:    w.tools,
		Channels: worldChannels(),
		Timeout:  30 * time.Minute,
		Logger:   logger,
		WorkerID: "test-replica-b",
	}
	if edit != nil {
		edit(&cfg)
	}
	b, err := bot.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ad, err := New(Config{
		Mode: ModeHTTP, BotToken: testBotToken, SigningSecret: testSecret, APIURL: w.fake.apiURL(),
		HTTPClient: &http.Client{Timeout: 10 * time.Second}, Logger: logger,
	}, b, store)
	if err != nil {
		t.Fatal(err)
	}
	b.Register(Platform, ad)
	if err := ad.Start(ctx); err != nil {
		t.Fatal(err)
	}
	runErr := make(chan error, 1)
	go func() { runErr <- ad.Run(ctx) }()
	mux := http.NewServeMux()
	mux.Handle("/slack/events", ad.Handler())
	r := &world{t: t, mode: ModeHTTP, fake: w.fake, db: w.db, model: w.model, tools: w.tools, bot: b, ad: ad,
		events: httptest.NewServer(mux), logs: w.logs}
	r.seq.Store(1_000_000) // event ids apart from the world's: both mark them in one database
	// Registered after the world's cleanup, so it runs before the
	// database is closed.
	t.Cleanup(func() {
		stopRun(t, "replica Run", cancel, runErr)
		r.events.Close()
	})
	return r
}

// Guards the card of a call a grant allowed when its adapter does not know
// who granted it: the grant was made through another process (whose
// adapter posted the notice), and this adapter's store has no Grant
// method, so neither its memory nor storage can name the granter. The
// card it posts, and its update once the batch ran, must still render,
// naming the grant by its id, and must not say the call was allowed by
// anyone's grant in particular (not the requester, not the approver who
// allowed the rest of the batch).
func TestCardNamesGrantByIDWhenGranterUnknown(t *testing.T) {
	grants := func(c *bot.Config) {
		c.GrantFor = time.Hour
		c.Policy = confirm.NewPolicy(true, []string{"service_status"})
	}
	a := newWorldWith(t, ModeSocket, grants)

	// Process A: Alice allows a deploy for 1h; A posts the grant notice.
	a.model.PushCalls(tc("call_deploy", "deploy", `{"service":"api"}`)).PushText("Deployed api.")
	a.deliverEvent(mention(a.eventID(), chanOps, bob, mentionTS, "", "<@"+botUser+"> deploy api"), 0)
	first := a.waitCard(1)
	a.deliverInteraction(clickOn(first, alice, ActionAllowGrant, refByStyle(t, first, "primary")))
	a.waitText(chanOps, "Deployed api.")
	notice := a.waitText(chanOps, "granted calls of deploy")
	a.ad.Wait()
	revoke := buttonsWith(t, notice, ActionRevokeGrant)
	if len(revoke) != 1 {
		t.Fatalf("grant notice buttons %+v", cardButtons(t, notice))
	}
	grantID, err := confirm.ParseGrantRef(revoke[0].Value)
	if err != nil {
		t.Fatal(err)
	}
	if g, err := a.db.Grant(context.Background(), grantID); err != nil || g.CreatedBy != alice {
		t.Fatalf("stored grant %+v (%v), want Alice's", g, err)
	}

	// Process B, whose adapter cannot ask storage, takes the next turn of
	// the thread: a granted deploy and a status call that needs a card.
	b := a.replica(eventsOnly{a.db}, grants)
	if b.ad.grants.store != nil {
		t.Fatal("the replica's adapter can ask storage for grants: the test would not test the fallback")
	}
	b.model.PushCalls(tc("call_deploy2", "deploy", `{"service":"web"}`), tc("call_status", "service_status", `{"service":"web"}`)).PushText("Both done.")
	b.deliverEvent(mention(b.eventID(), chanOps, bob, "1700000000.000200", mentionTS, "<@"+botUser+"> deploy web and check it"), 0)
	card := b.waitCard(2)
	b.ad.Wait()
	if card.param("thread_ts") != mentionTS {
		t.Fatalf("card in thread %q, want %q", card.param("thread_ts"), mentionTS)
	}
	var notices int
	for _, c := range a.texts(chanOps) {
		if strings.Contains(c.param("text"), "granted calls of deploy") {
			notices++
		}
	}
	if notices != 1 {
		t.Fatalf("%d grant notices posted, want A's one (B must never have seen one)", notices)
	}

	// checkGrantLine: the granted call's status names the grant, and no
	// person, on a card as posted or updated.
	checkGrantLine := func(what string, c apiCall) {
		t.Helper()
		shown, live := readBlocks(t, []byte(c.param("blocks")))
		if bad := liveProblems(live+c.param("text"), shown+c.param("text")); len(bad) != 0 {
			t.Errorf("%s is live or hides something: %v", what, bad)
		}
		var line string
		for _, l := range strings.Split(shown, "\n") {
			if strings.Contains(l, "Allowed by") && strings.Contains(l, "grant") {
				line = l
			}
		}
		if !strings.Contains(line, "Allowed by grant "+grantID) {
			t.Errorf("%s does not name the grant %s:\n%s", what, grantID, shown)
		}
		if strings.Contains(line, "<@") || strings.Contains(shown, "'s grant") {
			t.Errorf("%s names someone's grant: %q\n%s", what, line, shown)
		}
		if strings.Contains(c.param("text"), alice) {
			t.Errorf("%s notification text names people: %q", what, c.param("text"))
		}
	}
	checkGrantLine("the posted card", card)
	if n := a.tools["deploy"].runs.Load(); n != 1 {
		t.Fatalf("the granted deploy ran before the batch was decided (%d runs)", n)
	}

	// Alice allows the status call on B's card: the batch runs and the
	// card's update still names the grant by its id.
	b.deliverInteraction(clickOn(card, alice, ActionAllow, refByStyle(t, card, "primary")))
	b.waitText(chanOps, "Both done.")
	b.ad.Wait()
	if d, s := a.tools["deploy"].runs.Load(), a.tools["service_status"].runs.Load(); d != 2 || s != 1 {
		t.Fatalf("deploy ran %d times, status %d; want 2 and 1", d, s)
	}
	updates := b.updatesOf(chanOps, card.TS)
	if len(updates) == 0 {
		t.Fatal("the card was never updated")
	}
	final := updates[len(updates)-1]
	if txt := blocksText(t, final); len(cardButtons(t, final)) != 0 || !strings.Contains(txt, "succeeded") ||
		!strings.Contains(txt, fmt.Sprintf("Allowed by <@%s>", alice)) {
		t.Errorf("final card:\n%s", txt)
	}
	checkGrantLine("the updated card", final)
}
