package chaos

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/adapters/slack/slacktest"
	"github.com/airlockhq/airlock/confirm"
)

// TestScheduleReplays: a seed draws the same faults and kills again, the
// stretches never overlap and stay inside the soak.
func TestScheduleReplays(t *testing.T) {
	start := time.Unix(1800000000, 0)
	draw := func(seed uint64) *schedule {
		return newSchedule(rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), start, 5*time.Minute, 30*time.Second, true)
	}
	a, b := draw(42), draw(42)
	if !reflect.DeepEqual(a.faults, b.faults) || !reflect.DeepEqual(a.kills, b.kills) {
		t.Fatal("the same seed drew another schedule")
	}
	if reflect.DeepEqual(a.faults, draw(43).faults) {
		t.Fatal("another seed drew the same schedule")
	}
	if len(a.faults) < 10 || len(a.kills) < 7 {
		t.Fatalf("5 minutes got %d stretches and %d kills", len(a.faults), len(a.kills))
	}
	end := start.Add(5 * time.Minute)
	for i, f := range a.faults {
		if f.from.Before(start) || f.to.After(end) || !f.to.After(f.from) {
			t.Fatalf("stretch %d %v outside the soak", i, f)
		}
		if i > 0 && f.from.Before(a.faults[i-1].to) {
			t.Fatalf("stretches %d and %d overlap", i-1, i)
		}
		if got := a.at(f.from.Add(f.to.Sub(f.from) / 2)); got != f {
			t.Fatalf("at the middle of stretch %d: %v", i, got)
		}
	}
	if got := a.at(a.faults[0].from.Add(-time.Millisecond)); got.kind != faultNone {
		t.Fatalf("before the first stretch: %v", got.kind)
	}
	kinds := map[faultKind]bool{}
	for _, f := range a.faults {
		kinds[f.kind] = true
	}
	for _, k := range []faultKind{faultSlack429, faultSlack5xx, faultToolSlow, faultDBAway} {
		if !kinds[k] {
			t.Errorf("5 minutes drew no %s", k)
		}
	}
}

// checkWorld is a world with a fake Slack holding one card message.
func checkWorld(t *testing.T, blocks string) (*world, msgKey) {
	t.Helper()
	w := &world{slack: newFakeSlack(&schedule{}), tool: newToolServer(&schedule{}), report: &Report{}}
	k := msgKey{"C0SOAK00", "1800000000.000001"}
	w.slack.seen(slacktest.Call{Method: "chat.postMessage", TS: k.ts, Raw: map[string]json.RawMessage{
		"channel": []byte(`"C0SOAK00"`), "blocks": []byte(blocks)}})
	return w, k
}

func cardBlocks(icons ...string) string {
	var els []string
	for _, i := range icons {
		els = append(els, `{"type":"emoji","name":"`+i+`"}`)
	}
	return `[{"type":"rich_text","block_id":"call_1","elements":[{"type":"rich_text_section","elements":[{"type":"text","text":"1. "}]},` +
		`{"type":"rich_text_section","elements":[` + strings.Join(els, ",") + `]}]}]`
}

// TestCheckCard: a card still showing a waiting call, or not yet its run,
// is a violation; one showing the stored decision and run is not.
func TestCheckCard(t *testing.T) {
	b := &confirm.Batch{ID: "b1", Status: confirm.BatchDone, Calls: []confirm.Call{
		{Key: "call_0", Position: 0, Decision: confirm.DecisionAllowed, Run: confirm.RunSucceeded}}}
	for name, tc := range map[string]struct {
		blocks string
		bad    bool
	}{
		"converged":      {cardBlocks("white_check_mark", "heavy_check_mark"), false},
		"still waiting":  {cardBlocks("hourglass_flowing_sand"), true},
		"run not shown":  {cardBlocks("white_check_mark"), true},
		"wrong decision": {cardBlocks("no_entry_sign"), true},
		"offers Allow": {`[{"type":"rich_text","block_id":"call_1","elements":[{"type":"rich_text_section","elements":[{"type":"emoji","name":"white_check_mark"},{"type":"emoji","name":"heavy_check_mark"}]}]},` +
			`{"type":"actions","elements":[{"type":"button","action_id":"airlock_allow","value":"b1.0.0"}]}]`, true},
	} {
		t.Run(name, func(t *testing.T) {
			w, k := checkWorld(t, tc.blocks)
			w.checkCard(w.report, b, confirm.CardMain, k)
			if got := len(w.report.Violations) > 0; got != tc.bad {
				t.Fatalf("violations %q, want some: %v", w.report.Violations, tc.bad)
			}
		})
	}
}

// TestCheckRuns: a key run twice, a run of a call nobody allowed, a call
// left pending and a decided batch not ended are each a violation.
func TestCheckRuns(t *testing.T) {
	ok := &confirm.Batch{ID: "b1", Status: confirm.BatchDone, Calls: []confirm.Call{
		{Key: "k", IdempotencyKey: "b1/k", Decision: confirm.DecisionAllowed, Run: confirm.RunSucceeded},
		{Key: "d", IdempotencyKey: "b1/d", Decision: confirm.DecisionDenied, Run: confirm.RunNotStarted}}}
	for name, tc := range map[string]struct {
		batch *confirm.Batch
		runs  map[string]int
		want  string
	}{
		"fine":        {ok, map[string]int{"b1/k": 1}, ""},
		"twice":       {ok, map[string]int{"b1/k": 2}, "ran 2 times"},
		"not allowed": {ok, map[string]int{"b1/k": 1, "b1/d": 1}, "no allowed call"},
		"pending": {&confirm.Batch{ID: "b2", Status: confirm.BatchPending, Calls: []confirm.Call{
			{Key: "p", Decision: confirm.DecisionPending}}}, nil, "still pending"},
		"not ended": {&confirm.Batch{ID: "b3", Status: confirm.BatchDecided, Calls: []confirm.Call{
			{Key: "a", IdempotencyKey: "b3/a", Decision: confirm.DecisionAllowed, Run: confirm.RunNotStarted}}}, nil, "its run is not_started"},
	} {
		t.Run(name, func(t *testing.T) {
			w := &world{tool: newToolServer(&schedule{}), report: &Report{}}
			w.tool.runs = tc.runs
			w.checkRuns(w.report, map[string]*confirm.Batch{tc.batch.ID: tc.batch})
			got := strings.Join(w.report.Violations, "\n")
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("violations %q, want %q", got, tc.want)
			}
		})
	}
}

// clickWorld is a world with batch b1 of two calls (k0, k1) and the
// clicks made.
func clickWorld(clicks ...click) (*world, map[string]*confirm.Batch) {
	w := &world{slack: newFakeSlack(&schedule{}), report: &Report{}, clicks: clicks}
	b := &confirm.Batch{ID: "b1", Calls: []confirm.Call{{Key: "k0", Position: 0}, {Key: "k1", Position: 1}}}
	return w, map[string]*confirm.Batch{"b1": b}
}

var (
	clickAt    = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	clickPlace = msgKey{"C0SOAK00", "1800000000.000001"}
)

func clickOf(user, action, ref string, status int) click {
	return click{user: user, action: action, ref: ref, batch: "b1", at: clickAt, answered: clickAt, status: status,
		approver: user != stranger && user != requester, where: clickPlace, thread: "1700000000.000001"}
}

func decision(actor, call string) confirm.AuditEvent {
	return confirm.AuditEvent{Kind: confirm.AuditDecision, Actor: actor, BatchID: "b1", CallKey: call}
}

// tellPrivately records an ephemeral to user in the clicks' place.
func tellPrivately(w *world, user string) {
	w.slack.seen(slacktest.Call{Method: "chat.postEphemeral", Raw: map[string]json.RawMessage{
		"channel": []byte(`"` + clickPlace.channel + `"`), "thread_ts": []byte(`"1700000000.000001"`), "user": []byte(`"` + user + `"`), "text": []byte(`"no"`)}})
}

// TestCheckClicks: an acknowledged click neither in the audit (matched
// by person, batch and call) nor answered privately is a violation,
// however soon Airlock was killed after it; a lost Allow of one call is
// not masked by the same person's recorded click on another call of the
// batch; a click answered privately, or never acknowledged, is none; a
// stranger's decision and the requester's allow are.
func TestCheckClicks(t *testing.T) {
	allow0, allow1 := clickOf(approvers[0], actionAllow, confirm.Ref("b1", 0), 200), clickOf(approvers[0], actionAllow, confirm.Ref("b1", 1), 200)
	for name, tc := range map[string]struct {
		clicks []click
		audit  []confirm.AuditEvent
		told   int // private answers to approvers[0] in the place
		want   string
	}{
		"recorded":                 {[]click{allow0}, []confirm.AuditEvent{decision(approvers[0], "k0")}, 0, ""},
		"lost":                     {[]click{allow0}, nil, 0, "answered nothing privately"},
		"lost, killed right after": {[]click{func() click { c := allow0; c.answered = clickAt.Add(time.Millisecond); return c }()}, nil, 0, "answered nothing privately"},
		"masked by another call":   {[]click{allow0, allow1}, []confirm.AuditEvent{decision(approvers[0], "k0")}, 0, "1 of " + approvers[0]},
		"recorded by someone else": {[]click{allow0}, []confirm.AuditEvent{decision(approvers[1], "k0")}, 0, "answered nothing privately"},
		"answered privately":       {[]click{allow0}, nil, 1, ""},
		"two lost, one answered":   {[]click{allow0, allow1}, nil, 1, "1 of " + approvers[0]},
		"never acknowledged":       {[]click{clickOf(approvers[0], actionAllow, confirm.Ref("b1", 0), 503)}, nil, 0, ""},
		"Allow all recorded":       {[]click{clickOf(approvers[0], actionAll, confirm.AllRef("b1", 0), 200)}, []confirm.AuditEvent{decision(approvers[0], "k1")}, 1, ""},
		"Allow all masks no loss":  {[]click{clickOf(approvers[0], actionAll, confirm.AllRef("b1", 0), 200), allow0}, []confirm.AuditEvent{decision(approvers[0], "k1")}, 1, "1 of " + approvers[0]},
		// An Allow all answered before the first click not in the audit
		// owes none of the private answers that came after it.
		"an earlier Allow all": {[]click{func() click {
			c := clickOf(approvers[0], actionAll, confirm.AllRef("b1", 0), 200)
			c.at = clickAt.Add(-time.Minute)
			return c
		}(), allow0}, []confirm.AuditEvent{decision(approvers[0], "k1")}, 1, ""},
		"a stranger decided":       {nil, []confirm.AuditEvent{decision(stranger, "k0")}, 0, "a stranger decided"},
		"the requester allowed":    {nil, []confirm.AuditEvent{{Kind: confirm.AuditDecision, Actor: requester, BatchID: "b1", CallKey: "k0", Detail: `{"status":"allowed"}`}}, 0, "requester allowed"},
		"the requester withdrew":   {nil, []confirm.AuditEvent{{Kind: confirm.AuditDecision, Actor: requester, BatchID: "b1", CallKey: "k0", Detail: `{"status":"denied"}`}}, 0, ""},
		"a stranger's click, told": {[]click{clickOf(stranger, actionAllow, confirm.Ref("b1", 0), 200)}, nil, 0, ""},
		"a stranger's click, lost": {[]click{clickOf(stranger, actionDeny, confirm.Ref("b1", 1), 200)}, nil, -1, "answered nothing privately"},
		"a click on no such call":  {[]click{clickOf(approvers[0], actionAllow, confirm.Ref("b1", 7), 200)}, []confirm.AuditEvent{decision(approvers[0], "")}, 0, "answered nothing privately"},
	} {
		t.Run(name, func(t *testing.T) {
			w, batches := clickWorld(tc.clicks...)
			for range tc.told {
				tellPrivately(w, approvers[0])
			}
			if name == "a stranger's click, told" {
				tellPrivately(w, stranger)
			}
			w.checkClicks(w.report, tc.audit, batches)
			got := strings.Join(w.report.Violations, "\n")
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("violations %q, want %q", got, tc.want)
			}
		})
	}
}

// TestCheckMentions: a mention acknowledged and answered nothing in its
// thread is a violation; one with a card or words, or never
// acknowledged, is none.
func TestCheckMentions(t *testing.T) {
	for name, tc := range map[string]struct {
		acked, posted bool
		bad           bool
	}{
		"answered":           {true, true, false},
		"lost":               {true, false, true},
		"never acknowledged": {false, false, false},
	} {
		t.Run(name, func(t *testing.T) {
			w := &world{slack: newFakeSlack(&schedule{}), report: &Report{}}
			c := &conversation{id: "w000n000", channel: "C0SOAK00", thread: "1700000000.000009", acked: tc.acked}
			w.convs = []*conversation{c}
			if tc.posted {
				w.slack.seen(slacktest.Call{Method: "chat.postMessage", TS: "1800000000.000009", Raw: map[string]json.RawMessage{
					"channel": []byte(`"C0SOAK00"`), "thread_ts": []byte(`"1700000000.000009"`), "text": []byte(`"I can't reach my database right now"`)}})
			}
			w.checkMentions(w.report)
			if got := len(w.report.Violations) > 0; got != tc.bad {
				t.Fatalf("violations %q, want some: %v", w.report.Violations, tc.bad)
			}
		})
	}
}

// answerDB is an answerSource holding one conversation's messages.
type answerDB struct {
	channel, thread string
	msgs            []confirm.Message
}

func (d answerDB) FindConversation(_ context.Context, platform, channel, thread string) (confirm.Conversation, error) {
	if platform != "slack" || channel != d.channel || thread != d.thread {
		return confirm.Conversation{}, confirm.ErrNotFound
	}
	return confirm.Conversation{ID: 7, Platform: platform, Channel: channel, Thread: thread}, nil
}

func (d answerDB) Messages(_ context.Context, id int64) ([]confirm.Message, error) {
	if id != 7 {
		return nil, confirm.ErrNotFound
	}
	return d.msgs, nil
}

// TestCheckAnswers: a conversation with a card whose model answer the
// database holds and its thread never saw is a violation; one whose
// thread saw it, or whose model never answered (nothing stored, or only
// its calls), is none (the latter a note).
func TestCheckAnswers(t *testing.T) {
	const channel, thread = "C0SOAK00", "1700000000.000009"
	calls := confirm.Message{Role: "assistant", Body: json.RawMessage(`{"role":"assistant","text":"I'll run them.","tool_calls":[{"id":"call_0"}]}`)}
	answer := confirm.Message{Role: "assistant", Body: json.RawMessage(`{"role":"assistant","text":"` + modelDone + `"}`)}
	for name, tc := range map[string]struct {
		stored   []confirm.Message
		posted   bool
		bad      bool
		answered int
	}{
		"stored, never posted": {[]confirm.Message{calls, answer}, false, true, 0},
		"stored and posted":    {[]confirm.Message{calls, answer}, true, false, 1},
		"only its calls":       {[]confirm.Message{calls}, false, false, 0},
		"no conversation":      {nil, false, false, 0},
	} {
		t.Run(name, func(t *testing.T) {
			w := &world{slack: newFakeSlack(&schedule{}), report: &Report{}}
			c := &conversation{id: "w000n000", channel: channel, thread: thread, acked: true, gotCard: true}
			w.convs = []*conversation{c}
			post := func(ts, text string) {
				w.slack.seen(slacktest.Call{Method: "chat.postMessage", TS: ts, Raw: map[string]json.RawMessage{
					"channel": []byte(`"` + channel + `"`), "thread_ts": []byte(`"` + thread + `"`), "text": []byte(`"` + text + `"`)}})
			}
			post("1800000000.000008", "Approval needed") // its card
			if tc.posted {
				post("1800000000.000009", modelDone)
			}
			db := answerDB{channel: channel, thread: thread, msgs: tc.stored}
			if tc.stored == nil {
				db.thread = "elsewhere"
			}
			if err := w.checkAnswers(context.Background(), w.report, db); err != nil {
				t.Fatal(err)
			}
			w.checkMentions(w.report)
			got := strings.Join(w.report.Violations, "\n")
			if (len(w.report.Violations) > 0) != tc.bad || (tc.bad && !strings.Contains(got, "the database holds that their thread never saw")) {
				t.Fatalf("violations %q, want some: %v", got, tc.bad)
			}
			if !tc.bad && !tc.posted && len(w.report.Notes) != 1 {
				t.Fatalf("notes %q; want the conversation the model never answered", w.report.Notes)
			}
			if w.report.Answered != tc.answered {
				t.Fatalf("%d answered; want %d", w.report.Answered, tc.answered)
			}
		})
	}
}

// TestCheckMinimums: a soak that saw too few cards, clicks, decisions or
// kills fails, naming which; one that saw enough does not.
func TestCheckMinimums(t *testing.T) {
	o := Options{MinCards: 3, MinClicks: 3, MinDecisions: 3, MinKills: 1}
	w := &world{o: o, report: &Report{}}
	w.checkMinimums(w.report)
	got := strings.Join(w.report.Violations, "\n")
	for _, flag := range []string{"-min-cards", "-min-clicks", "-min-decisions", "-min-kills"} {
		if !strings.Contains(got, flag) {
			t.Errorf("nothing seen: no violation naming %s in %q", flag, got)
		}
	}
	w.report = &Report{Cards: 3, Clicks: 5, Kills: 1, Decisions: map[string]int{"allowed": 2, "denied": 1, "expired": 9}}
	w.checkMinimums(w.report)
	if len(w.report.Violations) != 0 {
		t.Fatalf("enough seen: %q", w.report.Violations)
	}
	w.report = &Report{Cards: 3, Clicks: 5, Kills: 1, Decisions: map[string]int{"allowed": 2, "expired": 9}}
	w.checkMinimums(w.report)
	if got := strings.Join(w.report.Violations, "\n"); !strings.Contains(got, "-min-decisions") {
		t.Fatalf("expired calls counted as people's decisions: %q", got)
	}
}

// fakeBatches is a database's batches for loadBatches.
type fakeBatches map[string]*confirm.Batch

func (f fakeBatches) BatchesIn(_ context.Context, st confirm.BatchStatus) ([]string, error) {
	var out []string
	for id, b := range f {
		if b.Status == st {
			out = append(out, id)
		}
	}
	return out, nil
}

func (f fakeBatches) Batch(_ context.Context, id string) (*confirm.Batch, error) {
	if b, ok := f[id]; ok {
		return b, nil
	}
	return nil, confirm.ErrNotFound
}

// TestBatchesFromTheDatabase: the batches checked are the database's,
// not only those the audit names: a stuck batch the audit never mentions
// is a violation; a batch the audit names and the database lacks is one.
func TestBatchesFromTheDatabase(t *testing.T) {
	db := fakeBatches{
		"inaudit": {ID: "inaudit", Status: confirm.BatchDone, Calls: []confirm.Call{{Key: "a", Decision: confirm.DecisionDenied}}},
		"dbonly":  {ID: "dbonly", Status: confirm.BatchPending, Calls: []confirm.Call{{Key: "p", Decision: confirm.DecisionPending}}},
	}
	w := &world{tool: newToolServer(&schedule{}), report: &Report{}}
	batches, err := loadBatches(t.Context(), w.report, db, []confirm.AuditEvent{{Kind: confirm.AuditToolCall, BatchID: "inaudit"}})
	if err != nil {
		t.Fatal(err)
	}
	w.checkRuns(w.report, batches)
	if got := strings.Join(w.report.Violations, "\n"); !strings.Contains(got, "batch dbonly is still pending") {
		t.Fatalf("a stuck batch only in the database: violations %q", got)
	}
	w.report = &Report{}
	if _, err := loadBatches(t.Context(), w.report, db, []confirm.AuditEvent{{Kind: confirm.AuditToolCall, BatchID: "gone"}}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(w.report.Violations, "\n"); !strings.Contains(got, "batch gone") {
		t.Fatalf("a batch only in the audit: violations %q", got)
	}
}

// fakeCards is a database's card messages for checkCards.
type fakeCards map[string][]confirm.CardMessage

func (f fakeCards) CardMessages(_ context.Context, id string) ([]confirm.CardMessage, error) {
	return f[id], nil
}

// TestCheckCardsUnknownMessage: a message the database does not know of
// still offering a decision of a decided batch is a violation.
func TestCheckCardsUnknownMessage(t *testing.T) {
	b := &confirm.Batch{ID: "b1", Status: confirm.BatchDone, Calls: []confirm.Call{
		{Key: "call_0", Position: 0, Decision: confirm.DecisionAllowed, Run: confirm.RunSucceeded}}}
	w, k := checkWorld(t, `[{"type":"actions","elements":[{"type":"button","action_id":"airlock_allow","value":"`+confirm.Ref("b1", 0)+`"}]}]`)
	known := fakeCards{"b1": {{Kind: confirm.CardMain, Channel: k.channel, Ref: k.channel + "/1800000000.000999"}}}
	if err := w.checkCards(t.Context(), w.report, known, map[string]*confirm.Batch{"b1": b}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(w.report.Violations, "\n"); !strings.Contains(got, "is no card of batch b1 the database knows") {
		t.Fatalf("violations %q", got)
	}
}

// TestFlagsNamed: bad flags are refused, naming the flag.
func TestFlagsNamed(t *testing.T) {
	good := Options{Driver: "sqlite", Conversations: 10, Duration: time.Minute, KillEvery: 30 * time.Second, Timeout: 45 * time.Second, Settle: time.Minute}
	for flag, o := range map[string]Options{
		"-driver":        func() Options { o := good; o.Driver = "mysql"; return o }(),
		"-dsn":           func() Options { o := good; o.Driver = "postgres"; return o }(),
		"-conversations": func() Options { o := good; o.Conversations = 0; return o }(),
		"-duration":      func() Options { o := good; o.Duration = time.Hour; return o }(),
		"-kill-every":    func() Options { o := good; o.KillEvery = time.Second; return o }(),
		"-settle":        func() Options { o := good; o.Settle = time.Second; return o }(),
		"-min-cards":     func() Options { o := good; o.MinCards = -2; return o }(),
		"-min-kills":     func() Options { o := good; o.KillEvery, o.MinKills = 0, 1; return o }(),
	} {
		if err := o.validate(); err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("%s: %v", flag, err)
		}
	}
	if err := good.validate(); err != nil {
		t.Fatal(err)
	}
}
