package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/storage"
)

// Report is a soak's figures and the violations it found.
type Report struct {
	Seed          uint64
	Driver        string
	Conversations int
	Duration      time.Duration
	Elapsed       time.Duration

	Mentions, Cards, Answered int // conversations started, that got a card, whose model answered
	Batches, Calls            int
	Decisions                 map[string]int // per stored decision
	Runs                      map[string]int // per run status of allowed calls
	ToolRequests, MaxRunsKey  int            // requests the tool service got; the most for one idempotency key
	Clicks, Unanswered        int            // clicks sent; never answered (Airlock away for every try)
	Checked                   int            // clicks acknowledged as recorded, each found in the audit
	Refused                   int            // clicks answered privately (refused, or asked to click again)
	NearKill                  int            // approvers' clicks not checked: Airlock was killed soon after
	CardMessages              int            // card messages checked against their calls
	Updates                   int64          // chat.update calls the fake accepted
	Limited, Failed           int64          // 429 and 5xx the fake Slack answered
	SlowTool                  int64          // tool requests answered after the tools' timeout
	Kills, Starts             int
	FailedStarts              int            // starts refused (the database away at start)
	Faults                    map[string]int // stretches per fault kind

	Violations []string
	Notes      []string
	mu         sync.Mutex
}

func (r *Report) violate(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Violations = append(r.Violations, fmt.Sprintf(format, args...))
}

func (r *Report) note(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

func (r *Report) print(w io.Writer) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("airlock soak -chaos: seed %d, %s, %d conversations for %s (%s in all)", r.Seed, r.Driver, r.Conversations, r.Duration, r.Elapsed.Round(time.Second))
	p("faults: %s; Airlock SIGKILLed %d times (%d starts, %d refused while the database was away)", counts(r.Faults), r.Kills, r.Starts, r.FailedStarts)
	p("fake Slack: %d answered 429, %d answered 5xx, %d chat.update accepted; tool: %d requests answered late", r.Limited, r.Failed, r.Updates, r.SlowTool)
	p("conversations: %d mentions, %d got a card, %d answered by the model", r.Mentions, r.Cards, r.Answered)
	p("batches: %d, calls: %d; decisions: %s", r.Batches, r.Calls, counts(r.Decisions))
	p("runs of allowed calls: %s; tool requests: %d, at most %d per idempotency key", counts(r.Runs), r.ToolRequests, r.MaxRunsKey)
	p("clicks: %d sent, %d never answered, %d answered privately, %d acknowledged as recorded and found in the audit, %d not checked (Airlock killed within %s)", r.Clicks, r.Unanswered, r.Refused, r.Checked, r.NearKill, workedWithin)
	p("card messages checked against their calls: %d", r.CardMessages)
	for _, n := range r.Notes {
		p("note: %s", n)
	}
	if len(r.Violations) == 0 {
		p("ok: every allowed call ran at most once, none is stuck, every card converged, no recorded click is missing")
		return
	}
	for _, v := range r.Violations {
		p("VIOLATION: %s", v)
	}
}

// firstFew lists up to five ids, for a person to look them up in the logs
// (the mention's text carries "id=<id>").
func firstFew(ids []string) string {
	if len(ids) > 5 {
		return strings.Join(ids[:5], ", ") + ", …"
	}
	return strings.Join(ids, ", ")
}

func counts(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// finish lets Airlock finish what is left without faults, stops it, and
// checks the database, the tool's counts and the fake Slack's messages.
func (w *world) finish(ctx context.Context) (*Report, error) {
	r := w.report
	// Cards catch up once nothing fails: wait until Slack has been quiet.
	deadline := time.Now().Add(w.o.Settle)
	last, quiet := w.slack.updates.Load(), time.Now()
	for time.Now().Before(deadline) && time.Since(quiet) < 10*time.Second && ctx.Err() == nil {
		time.Sleep(500 * time.Millisecond)
		if n := w.slack.updates.Load(); n != last {
			last, quiet = n, time.Now()
		}
	}
	w.airlock.stop()
	r.Starts = w.airlock.starts
	r.Limited, r.Failed, r.Updates, r.SlowTool = w.slack.limited.Load(), w.slack.failed.Load(), w.slack.updates.Load(), w.tool.slow.Load()
	r.Faults = map[string]int{}
	for _, k := range []faultKind{faultSlack429, faultSlack5xx, faultToolSlow, faultDBAway} {
		if n := w.faults.count(k); n > 0 {
			r.Faults[k.String()] = n
		}
	}
	db, err := storage.Open(ctx, w.o.Driver, w.o.DSN)
	if err != nil {
		return r, fmt.Errorf("open the database to check it: %w", err)
	}
	defer db.Close()
	events, err := db.AuditEvents(ctx, confirm.AuditFilter{})
	if err != nil {
		return r, fmt.Errorf("read the audit: %w", err)
	}
	batches := map[string]*confirm.Batch{}
	for _, e := range events {
		if e.BatchID == "" || batches[e.BatchID] != nil {
			continue
		}
		b, err := db.Batch(ctx, e.BatchID)
		if err != nil {
			return r, fmt.Errorf("read batch %s: %w", e.BatchID, err)
		}
		batches[e.BatchID] = b
	}
	w.checkRuns(r, batches)
	if err := w.checkCards(ctx, r, db, batches); err != nil {
		return r, err
	}
	w.checkClicks(r, events)
	var noCard, noAnswer []string
	for _, c := range w.convs {
		r.Mentions++
		if c.gotCard {
			r.Cards++
		} else {
			noCard = append(noCard, c.id)
		}
		if c.answered {
			r.Answered++
		} else if c.gotCard {
			noAnswer = append(noAnswer, c.id)
		}
	}
	if len(noCard) > 0 {
		r.note("%d mentions got no card within 40 s (a card posted while Slack failed, or a turn lost to a kill): %s", len(noCard), firstFew(noCard))
	}
	if len(noAnswer) > 0 {
		r.note("%d conversations with a card saw no answer of the model in their thread: %s", len(noAnswer), firstFew(noAnswer))
	}
	return r, nil
}

// checkRuns: every allowed call ran at most once (per idempotency key,
// counted by the tool), only allowed calls ran, no call is still pending,
// and every batch whose calls are all decided ran to its end.
func (w *world) checkRuns(r *Report, batches map[string]*confirm.Batch) {
	r.Decisions, r.Runs = map[string]int{}, map[string]int{}
	allowed := map[string]bool{}
	for _, b := range batches {
		r.Batches++
		decided := true
		for _, c := range b.Calls {
			r.Calls++
			r.Decisions[string(c.Decision)]++
			if c.Decision == confirm.DecisionPending {
				decided = false
				r.violate("call %s of batch %s is still pending (expired at %s)", c.Key, b.ID, c.ExpiresAt.Format(time.RFC3339))
			}
			if c.Decision.Allowed() {
				allowed[c.IdempotencyKey] = true
				r.Runs[string(c.Run)]++
				if decided && (c.Run == confirm.RunNotStarted || c.Run == confirm.RunRunning) {
					r.violate("call %s of batch %s was allowed but its run is %s", c.Key, b.ID, c.Run)
				}
			}
		}
		if decided && b.Status != confirm.BatchDone {
			r.violate("batch %s has every call decided but is %s", b.ID, b.Status)
		}
	}
	for key, n := range w.tool.counts() {
		r.ToolRequests += n
		r.MaxRunsKey = max(r.MaxRunsKey, n)
		if n > 1 {
			r.violate("idempotency key %s ran %d times", key, n)
		}
		if !allowed[key] {
			r.violate("idempotency key %s ran, but no allowed call has it", key)
		}
	}
}

// decisionButtons are the buttons that decide a call.
var decisionButtons = []string{actionAllow, actionDeny, actionAll, "airlock_deny_all", "airlock_allow_grant", "airlock_deny_reason", "airlock_edit"}

// checkCards: every card message's last rendering on the fake Slack
// shows each call's stored decision and run, and a decided call offers no
// button deciding it; no message the database does not know of still
// offers one.
func (w *world) checkCards(ctx context.Context, r *Report, db *storage.DB, batches map[string]*confirm.Batch) error {
	known := map[msgKey]bool{}
	for _, b := range batches {
		msgs, err := db.CardMessages(ctx, b.ID)
		if err != nil {
			return fmt.Errorf("card messages of %s: %w", b.ID, err)
		}
		if len(msgs) == 0 && b.CardRef != "" {
			msgs = []confirm.CardMessage{{Kind: confirm.CardMain, Channel: b.CardRef, Ref: b.CardRef}}
		}
		for _, m := range msgs {
			for _, ref := range strings.Split(m.Ref, ",") {
				ch, ts, ok := strings.Cut(ref, "/")
				if !ok {
					continue
				}
				k := msgKey{ch, ts}
				known[k] = true
				if m.Kind == confirm.CardPointer {
					continue
				}
				r.CardMessages++
				w.checkCard(r, b, m.Kind, k)
			}
		}
	}
	for _, k := range w.slack.allMessages() {
		if known[k] {
			continue
		}
		m, _ := w.slack.lastRendering(k)
		for _, bt := range buttonsOf(m.blocks) {
			if !slices.Contains(decisionButtons, bt.action) {
				continue
			}
			if id, _, err := confirm.ParseRef(bt.value); err == nil && batches[id] != nil && batches[id].Status != confirm.BatchPending {
				r.violate("message %s/%s is no card of batch %s the database knows, and still offers %s", k.channel, k.ts, id, bt.action)
				break
			}
		}
	}
	return nil
}

// The Slack card's icons: the decision's, then the run's.
var (
	decisionEmoji = map[confirm.DecisionStatus]string{
		confirm.DecisionPending: "hourglass_flowing_sand", confirm.DecisionAllowed: "white_check_mark",
		confirm.DecisionAllowedByGrant: "white_check_mark", confirm.DecisionDenied: "no_entry_sign",
		confirm.DecisionDeniedByRule: "no_entry_sign", confirm.DecisionExpired: "alarm_clock",
	}
	runEmoji = map[confirm.RunStatus]string{
		confirm.RunRunning: "gear", confirm.RunSucceeded: "heavy_check_mark", confirm.RunFailed: "x", confirm.RunUnknown: "warning",
	}
)

func (w *world) checkCard(r *Report, b *confirm.Batch, kind string, k msgKey) {
	m, ok := w.slack.lastRendering(k)
	if !ok {
		r.violate("card message %s/%s (%s) of batch %s was never posted on Slack", k.channel, k.ts, kind, b.ID)
		return
	}
	blocks, _ := m.blocks.([]any)
	for _, c := range b.Calls {
		emojis := callEmojis(blocks, c.Position+1)
		want := []string{decisionEmoji[c.Decision]}
		if e, ok := runEmoji[c.Run]; ok && c.Decision.Allowed() {
			want = append(want, e)
		}
		if want[0] != "" && !containsInOrder(emojis, want) {
			r.violate("card message %s/%s (%s) shows call %d as %v; stored: %s, run %s", k.channel, k.ts, kind, c.Position+1, emojis, c.Decision, c.Run)
		}
	}
	if b.Status == confirm.BatchPending {
		return
	}
	for _, bt := range buttonsOf(m.blocks) {
		if slices.Contains(decisionButtons, bt.action) {
			r.violate("card message %s/%s (%s) of decided batch %s still offers %s", k.channel, k.ts, kind, b.ID, bt.action)
			return
		}
	}
}

// callEmojis lists the emoji of the status line of call n's block.
func callEmojis(blocks []any, n int) []string {
	var out []string
	for _, bl := range blocks {
		m, _ := bl.(map[string]any)
		if m["block_id"] != "call_"+strconv.Itoa(n) {
			continue
		}
		els, _ := m["elements"].([]any)
		if len(els) == 0 {
			return nil
		}
		status, _ := els[len(els)-1].(map[string]any) // the status is the block's last section
		inner, _ := status["elements"].([]any)
		for _, e := range inner {
			if em, _ := e.(map[string]any); em["type"] == "emoji" {
				name, _ := em["name"].(string)
				out = append(out, name)
			}
		}
	}
	return out
}

func containsInOrder(have, want []string) bool {
	i := 0
	for _, h := range have {
		if i < len(want) && h == want[i] {
			i++
		}
	}
	return i == len(want)
}

// checkClicks: a click acknowledged as recorded (answered 2xx, its
// clicker told nothing privately in that place, Airlock not killed around
// it) by an approver is in the audit; no stranger decided anything and the
// requester allowed nothing. A person's clicks in one place are checked
// only when they clicked once there (a private answer can't be told apart
// between two).
func (w *world) checkClicks(r *Report, events []confirm.AuditEvent) {
	type place struct{ user, channel, thread string }
	n := map[place]int{}
	for _, c := range w.clicks {
		n[place{c.user, c.where.channel, c.thread}]++
	}
	byActor := map[string][]confirm.AuditEvent{}
	for _, e := range events {
		if e.Kind == confirm.AuditDecision || e.Kind == confirm.AuditApproval {
			byActor[e.Actor] = append(byActor[e.Actor], e)
		}
	}
	for _, c := range w.clicks {
		r.Clicks++
		if c.status == 0 {
			r.Unanswered++
			continue
		}
		if len(w.slack.ephemeralsTo(c.user, c.where.channel, c.thread, c.at)) > 0 {
			r.Refused++
			continue
		}
		if !c.approver || c.status/100 != 2 || n[place{c.user, c.where.channel, c.thread}] != 1 {
			continue
		}
		if w.killedAround(c) {
			r.NearKill++
			continue
		}
		found := false
		for _, e := range byActor[c.user] {
			if e.BatchID == c.batch {
				found = true
				break
			}
		}
		if !found {
			r.violate("%s's %s on batch %s at %s was acknowledged, answered nothing privately, and is not in the audit", c.user, c.action, c.batch, c.at.Format("15:04:05.000"))
			continue
		}
		r.Checked++
	}
	for _, e := range byActor[stranger] {
		r.violate("a stranger decided call %s of batch %s", e.CallKey, e.BatchID)
	}
	for _, e := range byActor[requester] {
		var d struct {
			Status string `json:"status"`
		}
		_ = json.Unmarshal([]byte(e.Detail), &d)
		if e.Kind == confirm.AuditApproval || confirm.DecisionStatus(d.Status).Allowed() {
			r.violate("the requester allowed their own call %s of batch %s", e.CallKey, e.BatchID)
		}
	}
}

// workedWithin is how long after its acknowledgement a click is surely
// worked on (Slack's clicks are acknowledged first and worked on after,
// behind the others waiting): a kill within it may take an acknowledged
// click with it, unrecorded, its card unchanged; the clicker clicks again.
const workedWithin = 15 * time.Second

// killedAround reports whether Airlock was killed between a second before
// the click was sent and workedWithin after it was answered.
func (w *world) killedAround(c click) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, k := range w.killedAt {
		if !k.Before(c.at.Add(-time.Second)) && k.Before(c.answered.Add(workedWithin)) {
			return true
		}
	}
	return false
}
