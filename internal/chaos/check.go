package chaos

import (
	"context"
	"encoding/json"
	"errors"
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
	Acked, Lost               int // mentions acknowledged; of those, never answered in their thread
	Batches, Calls            int
	Decisions                 map[string]int // per stored decision
	Runs                      map[string]int // per run status of allowed calls
	ToolRequests, MaxRunsKey  int            // requests the tool service got; the most for one idempotency key
	Clicks, Unanswered        int            // clicks sent; never answered (Airlock away for every try)
	Checked                   int            // clicks acknowledged and found in the audit (person, batch, call)
	Refused                   int            // clicks acknowledged, not in the audit, answered privately
	LostClicks                int            // clicks acknowledged, neither in the audit nor answered privately
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
	p("conversations: %d mentions, %d acknowledged, %d of those never answered in their thread; %d got a card, %d answered by the model", r.Mentions, r.Acked, r.Lost, r.Cards, r.Answered)
	p("batches: %d, calls: %d; decisions: %s", r.Batches, r.Calls, counts(r.Decisions))
	p("runs of allowed calls: %s; tool requests: %d, at most %d per idempotency key", counts(r.Runs), r.ToolRequests, r.MaxRunsKey)
	p("clicks: %d sent, %d never answered; of those acknowledged, %d found in the audit (person, batch, call), %d answered privately, %d lost", r.Clicks, r.Unanswered, r.Checked, r.Refused, r.LostClicks)
	p("card messages checked against their calls: %d", r.CardMessages)
	for _, n := range r.Notes {
		p("note: %s", n)
	}
	if len(r.Violations) == 0 {
		p("ok: every allowed call ran at most once, none is stuck, every card converged, no acknowledged click or mention and no stored answer was lost")
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
	// Cards catch up once nothing fails: wait until Slack has been quiet
	// and Airlock says no card message is behind (a message whose updates
	// failed again and again waits out its backoff, up to minutes, while
	// Slack is quiet).
	deadline := time.Now().Add(w.o.Settle)
	last, quiet := w.slack.updates.Load(), time.Now()
	settled := func() bool {
		if time.Since(quiet) < w.o.quiet {
			return false
		}
		n, ok := w.airlock.cardsBehind()
		return ok && n == 0
	}
	for time.Now().Before(deadline) && !settled() && ctx.Err() == nil {
		time.Sleep(min(500*time.Millisecond, w.o.quiet/2))
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
	batches, err := loadBatches(ctx, r, db, events)
	if err != nil {
		return r, err
	}
	w.checkRuns(r, batches)
	if err := w.checkCards(ctx, r, db, batches); err != nil {
		return r, err
	}
	w.checkClicks(r, events, batches)
	if err := w.checkAnswers(ctx, r, db); err != nil {
		return r, err
	}
	w.checkMentions(r)
	w.checkMinimums(r)
	return r, nil
}

// batchSource is what the checks read of the database's batches
// (*storage.DB).
type batchSource interface {
	BatchesIn(ctx context.Context, status confirm.BatchStatus) ([]string, error)
	Batch(ctx context.Context, id string) (*confirm.Batch, error)
}

// loadBatches loads every batch the database holds, whatever the audit
// says (a batch the audit lost is checked all the same), and reports a
// batch the audit names that the database does not hold.
func loadBatches(ctx context.Context, r *Report, db batchSource, events []confirm.AuditEvent) (map[string]*confirm.Batch, error) {
	batches := map[string]*confirm.Batch{}
	for _, st := range []confirm.BatchStatus{confirm.BatchPending, confirm.BatchDecided, confirm.BatchRunning, confirm.BatchDone} {
		ids, err := db.BatchesIn(ctx, st)
		if err != nil {
			return nil, fmt.Errorf("list %s batches: %w", st, err)
		}
		for _, id := range ids {
			b, err := db.Batch(ctx, id)
			if err != nil {
				return nil, fmt.Errorf("read batch %s: %w", id, err)
			}
			batches[id] = b
		}
	}
	missing := map[string]bool{}
	for _, e := range events {
		if e.BatchID != "" && batches[e.BatchID] == nil && !missing[e.BatchID] {
			missing[e.BatchID] = true
			r.violate("the audit names batch %s, which the database does not hold", e.BatchID)
		}
	}
	return batches, nil
}

// checkMentions: every mention Airlock acknowledged was answered in its
// thread: a card, or words (the model's, or why nothing was done).
func (w *world) checkMentions(r *Report) {
	var lost []string
	for _, c := range w.convs {
		r.Mentions++
		if c.gotCard {
			r.Cards++
		}
		if c.answered {
			r.Answered++
		}
		if !c.acked {
			continue
		}
		r.Acked++
		if !w.slack.postedIn(c.channel, c.thread) {
			lost = append(lost, c.id)
		}
	}
	r.Lost = len(lost)
	if len(lost) > 0 {
		r.violate("%d mentions were acknowledged and never answered in their thread (no card, no words): %s", len(lost), firstFew(lost))
	}
}

// answerSource is what checkAnswers reads of the database's
// conversations (*storage.DB).
type answerSource interface {
	FindConversation(ctx context.Context, platform, channel, thread string) (confirm.Conversation, error)
	Messages(ctx context.Context, conversationID int64) ([]confirm.Message, error)
}

// checkAnswers: every conversation with a card whose model answer the
// database holds saw that answer in its thread, by the end of the soak:
// an answer stored and never posted (a kill between the two, a post the
// platform refused) is lost to the person who asked. A conversation whose
// model never answered at all (nothing stored: say its results never
// reached the model) is a note.
func (w *world) checkAnswers(ctx context.Context, r *Report, db answerSource) error {
	var unposted, never []string
	for _, c := range w.convs {
		if !c.gotCard {
			continue
		}
		if c.answered || w.slack.answered(c.channel, c.thread) {
			c.answered = true
			continue
		}
		stored, err := storedAnswer(ctx, db, c)
		if err != nil {
			return fmt.Errorf("the answer of %s: %w", c.id, err)
		}
		if stored {
			unposted = append(unposted, c.id)
		} else {
			never = append(never, c.id)
		}
	}
	if len(never) > 0 {
		r.note("%d conversations with a card saw no answer of the model in their thread, and the database holds none: %s", len(never), firstFew(never))
	}
	if len(unposted) > 0 {
		r.violate("%d conversations with a card have a model answer the database holds that their thread never saw: %s", len(unposted), firstFew(unposted))
	}
	return nil
}

// storedAnswer reports whether the database holds the model's answer of
// a conversation: a message of the assistant's, without calls, saying
// modelDone.
func storedAnswer(ctx context.Context, db answerSource, c *conversation) (bool, error) {
	conv, err := db.FindConversation(ctx, "slack", c.channel, c.thread)
	if errors.Is(err, confirm.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	msgs, err := db.Messages(ctx, conv.ID)
	if err != nil {
		return false, err
	}
	for _, m := range msgs {
		var body struct {
			Text      string            `json:"text"`
			ToolCalls []json.RawMessage `json:"tool_calls"`
		}
		if m.Role != "assistant" || json.Unmarshal(m.Body, &body) != nil {
			continue
		}
		if len(body.ToolCalls) == 0 && strings.Contains(body.Text, modelDone) {
			return true, nil
		}
	}
	return false, nil
}

// checkMinimums: the soak saw enough happen for its checks to mean
// something (a process that answers 200 to everything and does nothing
// passes every other check).
func (w *world) checkMinimums(r *Report) {
	decisions := r.Decisions[string(confirm.DecisionAllowed)] + r.Decisions[string(confirm.DecisionDenied)]
	for _, m := range []struct {
		what      string
		got, want int
		flag      string
	}{
		{"cards posted", r.Cards, w.o.MinCards, "-min-cards"},
		{"clicks sent", r.Clicks, w.o.MinClicks, "-min-clicks"},
		{"people's decisions stored", decisions, w.o.MinDecisions, "-min-decisions"},
		{"kills", r.Kills, w.o.MinKills, "-min-kills"},
	} {
		if m.got < m.want {
			r.violate("only %d %s, at least %d needed (%s): the soak did not exercise Airlock", m.got, m.what, m.want, m.flag)
		}
	}
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

// cardSource is what checkCards reads of a batch's card messages
// (*storage.DB).
type cardSource interface {
	CardMessages(ctx context.Context, batchID string) ([]confirm.CardMessage, error)
}

// decisionButtons are the buttons that decide a call.
var decisionButtons = []string{actionAllow, actionDeny, actionAll, "airlock_deny_all", "airlock_allow_grant", "airlock_deny_reason", "airlock_edit"}

// checkCards: every card message's last rendering on the fake Slack
// shows each call's stored decision and run, and a decided call offers no
// button deciding it; no message the database does not know of still
// offers one.
func (w *world) checkCards(ctx context.Context, r *Report, db cardSource, batches map[string]*confirm.Batch) error {
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

// checkClicks: every click Airlock acknowledged (2xx) is in the audit,
// matched by person, batch and call (an Allow all by person and batch),
// or was answered privately (refused, late, or asked to click again):
// in each place (person, channel, thread) there are at least as many
// private answers after the first click not in the audit as such
// clicks. No stranger decided anything and the requester allowed
// nothing.
func (w *world) checkClicks(r *Report, events []confirm.AuditEvent, batches map[string]*confirm.Batch) {
	type place struct{ user, channel, thread string }
	type decided struct{ user, batch, call string }
	inAudit := map[decided]bool{}
	byActor := map[string][]confirm.AuditEvent{}
	for _, e := range events {
		if e.Kind == confirm.AuditDecision || e.Kind == confirm.AuditApproval {
			byActor[e.Actor] = append(byActor[e.Actor], e)
			inAudit[decided{e.Actor, e.BatchID, e.CallKey}] = true
			inAudit[decided{e.Actor, e.BatchID, ""}] = true
		}
	}
	unmatched := map[place][]click{}
	allowAlls := map[place][]time.Time{} // matched Allow alls: each was answered privately with its result
	for _, c := range w.clicks {
		r.Clicks++
		if c.status == 0 {
			r.Unanswered++
			continue
		}
		if c.status/100 != 2 {
			continue // not acknowledged: the person saw it fail
		}
		pl := place{c.user, c.where.channel, c.thread}
		key := decided{c.user, c.batch, ""}
		if batchID, pos, err := confirm.ParseRef(c.ref); err == nil {
			key.batch = batchID
			if b := batches[batchID]; b != nil && pos < len(b.Calls) {
				key.call = b.Calls[pos].Key
			} else {
				key.call = fmt.Sprintf("#%d", pos) // no such call: never in the audit
			}
		} else if batchID, _, err := confirm.ParseAllRef(c.ref); err == nil {
			key.batch = batchID
		}
		if inAudit[key] {
			r.Checked++
			if key.call == "" {
				allowAlls[pl] = append(allowAlls[pl], c.at) // Allow all tells what it did
			}
			continue
		}
		unmatched[pl] = append(unmatched[pl], c)
	}
	for pl, cs := range unmatched {
		first := cs[0].at
		for _, c := range cs {
			if c.at.Before(first) {
				first = c.at
			}
		}
		told := len(w.slack.ephemeralsTo(pl.user, pl.channel, pl.thread, first))
		for _, at := range allowAlls[pl] {
			if !at.Before(first) {
				told-- // that answer was an Allow all's result
			}
		}
		r.Refused += min(max(told, 0), len(cs))
		if lost := len(cs) - max(told, 0); lost > 0 {
			r.LostClicks += lost
			var what []string
			for _, c := range cs {
				what = append(what, fmt.Sprintf("%s %s at %s", c.action, c.ref, c.at.Format("15:04:05.000")))
			}
			r.violate("%d of %s's clicks in %s/%s were acknowledged, are not in the audit and were answered nothing privately: %s",
				lost, pl.user, pl.channel, pl.thread, firstFew(what))
		}
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
