package slack

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/adapters/slack/slacktest"
	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/config"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/internal/pgtest"
	"github.com/airlockhq/airlock/model"
)

// onBothDatabases runs fn on a new SQLite file and, when
// AIRLOCK_TEST_POSTGRES_DSN is set (CI sets it), on a new PostgreSQL
// schema.
func onBothDatabases(t *testing.T, fn func(t *testing.T, driver, dsn string)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, "sqlite", filepath.Join(t.TempDir(), "a.db")) })
	t.Run("postgres", func(t *testing.T) {
		pg := os.Getenv("AIRLOCK_TEST_POSTGRES_DSN")
		if pg == "" {
			t.Skip("set AIRLOCK_TEST_POSTGRES_DSN (CI does) to run on PostgreSQL")
		}
		fn(t, "postgres", pgtest.FreshSchema(t, pg, "slackcap"))
	})
}

// capCalls is the default max_calls_per_reply: the most calls one card
// holds.
const capCalls = config.DefaultMaxCallsPerReply

// pushCap queues a model reply of n gated deploy calls, args(i) the
// arguments of the i-th, then the answer after them.
func (w *world) pushCap(n int, args func(i int) string, answer string) {
	var calls []confirm.ToolCall
	for i := range n {
		calls = append(calls, tc(fmt.Sprintf("call_%02d", i), "deploy", args(i)))
	}
	w.model.Push(model.Message{Text: "I'll deploy every service.", ToolCalls: calls})
	w.model.PushText(answer)
}

// cardParts are the messages of a batch's card as the store records them
// (a card over several messages lists each), as "<channel>/<ts>".
func (w *world) cardParts(batchID string, kind string) []string {
	w.t.Helper()
	msgs, err := w.db.CardMessages(context.Background(), batchID)
	if err != nil {
		w.t.Fatal(err)
	}
	var out []string
	for _, m := range msgs {
		if m.Kind == kind {
			out = append(out, strings.Split(m.Ref, ",")...)
		}
	}
	return out
}

// shownBlocks is what a message of the fake Slack shows now: its blocks
// as text and the values of its buttons.
func (w *world) shownBlocks(ref string) (text string, buttons []string) {
	w.t.Helper()
	ch, ts, err := ParseCardRef(ref)
	if err != nil {
		w.t.Fatal(err)
	}
	c, ok := w.fake.Shown(ch, ts)
	if !ok {
		w.t.Fatalf("message %s is not shown", ref)
	}
	var blocks any
	if err := json.Unmarshal([]byte(c.Param("blocks")), &blocks); err != nil {
		w.t.Fatalf("blocks of %s: %v", ref, err)
	}
	slacktest.Buttons(blocks, func(_, value string) { buttons = append(buttons, value) })
	return c.Param("blocks"), buttons
}

// refusedBySlack lists the messages Slack refused (past its limits).
func (w *world) refusedBySlack() []string {
	var out []string
	for _, c := range w.fake.Calls() {
		if c.Refused != "" {
			out = append(out, c.Method+": "+c.Refused)
		}
	}
	return out
}

// A card at the cap (32 calls, the default max_calls_per_reply) can be
// decided whole from Slack: every call has its buttons on a message of
// the card, each Allow clicked on the message that carries it counts, the
// batch runs, and every message of the card ends final, without buttons.
// Slack refuses nothing along the way.
func TestCardAtTheCapDecidedWholeOverSlack(t *testing.T) {
	onBothDatabases(t, func(t *testing.T, driver, dsn string) {
		testCardAtTheCapDecidedWhole(t, newWorldOn(t, ModeHTTP, driver, dsn, nil))
	})
}

func testCardAtTheCapDecidedWhole(t *testing.T, w *world) {
	w.pushCap(capCalls, func(i int) string {
		return fmt.Sprintf(`{"service":"svc-%02d","environment":"production","replicas":%d}`, i, i+1)
	}, "Deployed all 32.")
	w.deliverEvent(mention(w.eventID(), chanOps, bob, mentionTS, "", "<@"+botUser+"> deploy everything"), 0)
	w.waitCard(1)
	w.ad.Wait()

	allows := w.fake.ButtonValues(ActionAllow)
	if len(allows) != capCalls {
		t.Fatalf("%d Allow buttons on the card's messages, want %d (one per call); refused: %v", len(allows), capCalls, w.refusedBySlack())
	}
	ref, err := confirm.ParseCallRef(allows[0])
	if err != nil {
		t.Fatal(err)
	}
	parts := w.cardParts(ref.Batch, confirm.CardMain)
	if len(parts) < 2 {
		t.Fatalf("the card is %d message(s); 32 calls do not fit one", len(parts))
	}
	seen := map[string]bool{}
	for _, p := range parts {
		_, buttons := w.shownBlocks(p)
		for _, b := range buttons {
			seen[b] = true
		}
	}
	for _, a := range allows {
		if !seen[a] {
			t.Fatalf("Allow %s is on no message the store lists as the card's", a)
		}
	}

	// Each Allow, clicked on the message that carries it.
	for _, a := range allows {
		w.deliverInteraction(blockAction(alice, chanOps, mentionTS, ActionAllow, a))
	}
	w.waitText(chanOps, "Deployed all 32.")
	w.ad.Wait()
	if n := w.tools["deploy"].runs.Load(); n != capCalls {
		t.Fatalf("deploy ran %d times, want %d", n, capCalls)
	}
	batch, err := w.db.Batch(context.Background(), ref.Batch)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range batch.Calls {
		if c.Decision != confirm.DecisionAllowed || c.DecidedBy != alice || c.Run != confirm.RunSucceeded {
			t.Fatalf("call %d: %s by %q, run %s; want allowed by alice, succeeded", c.Position+1, c.Decision, c.DecidedBy, c.Run)
		}
	}
	if n := len(w.audit(confirm.AuditRejectedClick)); n != 0 {
		t.Fatalf("%d clicks refused", n)
	}
	waitFor(t, "every card message synced", func() bool {
		n, err := w.db.CardsBehind(context.Background())
		return err == nil && n == 0
	})
	for i, p := range parts {
		text, buttons := w.shownBlocks(p)
		if len(buttons) != 0 {
			t.Errorf("message %d of the card still has %d buttons", i+1, len(buttons))
		}
		if strings.Contains(text, "hourglass_flowing_sand") || strings.Contains(text, "cannot be decided") {
			t.Errorf("message %d of the card is not final:\n%s", i+1, text)
		}
	}
	if r := w.refusedBySlack(); len(r) != 0 {
		t.Fatalf("Slack refused %v", r)
	}
}

// hostileArgs are arguments as long and hostile as a model may write:
// mentions, markup, line breaks, hidden and wide characters, far more
// than a card shows.
func hostileArgs(i int) string {
	junk := strings.Repeat("<!channel> <@UMALLORY> *bold* ```` \u202e\u200b 漢字 \\n", 120)
	return fmt.Sprintf(`{"service":"svc-%02d","note":%q,"more":%q}`, i, junk, strings.Repeat("x", 3000))
}

// Hostile arguments can't push another call's buttons off the card nor
// make a message exceed Slack's limits: at the cap, with every fourth
// call's arguments long and hostile, every call has Allow and Deny on a
// message Slack accepted, every plain call's arguments are shown whole,
// and Deny all denies every one.
func TestHostileCallsCannotCrowdOutButtonsOverSlack(t *testing.T) {
	w := newWorld(t, ModeHTTP)
	w.pushCap(capCalls, func(i int) string {
		if i%4 == 0 {
			return hostileArgs(i)
		}
		return fmt.Sprintf(`{"service":"svc-%02d"}`, i)
	}, "Nothing deployed.")
	w.deliverEvent(mention(w.eventID(), chanOps, bob, mentionTS, "", "<@"+botUser+"> deploy everything"), 0)
	waitFor(t, "the card's post", func() bool { return len(w.fake.callsTo("chat.postMessage")) > 0 })
	w.ad.Wait()
	if r := w.refusedBySlack(); len(r) != 0 {
		t.Fatalf("Slack refused %v", r)
	}
	allows, denies := w.fake.ButtonValues(ActionAllow), w.fake.ButtonValues(ActionDeny)
	if len(allows) != capCalls || len(denies) != capCalls {
		t.Fatalf("%d Allow and %d Deny buttons, want %d each", len(allows), len(denies), capCalls)
	}
	ref, _ := confirm.ParseCallRef(allows[0])
	parts := w.cardParts(ref.Batch, confirm.CardMain)
	var all strings.Builder
	for _, p := range parts {
		text, _ := w.shownBlocks(p)
		all.WriteString(text)
	}
	for i := range capCalls {
		if i%4 != 0 && !strings.Contains(all.String(), fmt.Sprintf(`\"service\": \"svc-%02d\"`, i)) {
			t.Fatalf("plain call %d's arguments are not shown whole", i+1)
		}
	}
	all.Reset()
	deny := w.fake.ButtonValues(ActionDenyAll)
	if len(deny) != 1 {
		t.Fatalf("%d Deny all buttons, want 1", len(deny))
	}
	w.deliverInteraction(blockAction(alice, chanOps, mentionTS, ActionDenyAll, deny[0]))
	w.waitText(chanOps, "Nothing deployed.")
	w.ad.Wait()
	batch, err := w.db.Batch(context.Background(), ref.Batch)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range batch.Calls {
		if c.Decision != confirm.DecisionDenied {
			t.Fatalf("call %d: %s after Deny all", c.Position+1, c.Decision)
		}
	}
	waitFor(t, "every card message synced", func() bool {
		n, err := w.db.CardsBehind(context.Background())
		return err == nil && n == 0
	})
	for i, p := range parts {
		if _, buttons := w.shownBlocks(p); len(buttons) != 0 {
			t.Errorf("message %d of the card still has buttons", i+1)
		}
	}
	if r := w.refusedBySlack(); len(r) != 0 {
		t.Fatalf("Slack refused %v", r)
	}
}

// partWith is the message among parts (as "<channel>/<ts>") that shows a
// button carrying value.
func (w *world) partWith(parts []string, value string) (channel, ts string) {
	w.t.Helper()
	for _, p := range parts {
		if _, buttons := w.shownBlocks(p); slices.Contains(buttons, value) {
			ch, ts, _ := ParseCardRef(p)
			return ch, ts
		}
	}
	w.t.Fatalf("no message of %v carries %s", parts, value)
	return "", ""
}

// At the cap, routed to an approvals channel with copies in the
// approvers' DMs: each of the card's messages and of each copy's carries
// its calls' buttons; Allow clicked on the approvals channel's messages
// for half the calls and on carol's copy for the other half all count;
// every message of the card and of both copies ends final, and the
// thread's pointer closed.
func TestCardAtTheCapRoutedAndCopiedOverSlack(t *testing.T) {
	onBothDatabases(t, func(t *testing.T, driver, dsn string) {
		testCardAtTheCapRoutedAndCopied(t, newWorldOn(t, ModeHTTP, driver, dsn, func(c *bot.Config) {
			c.Channels = bot.NewChannels([]bot.Channel{
				{Platform: Platform, ID: chanOps, Approvers: []string{alice}, ApproverGroups: []string{groupOps}, ApprovalsChannel: chanApprovals, Notify: []string{"dm"}},
				{Platform: Platform, ID: chanApprovals, Approvers: []string{mallory}},
			})
		}))
	})
}

func testCardAtTheCapRoutedAndCopied(t *testing.T, w *world) {
	w.pushCap(capCalls, func(i int) string { return fmt.Sprintf(`{"service":"svc-%02d"}`, i) }, "Deployed all, routed.")
	w.deliverEvent(mention(w.eventID(), chanOps, bob, mentionTS, "", "<@"+botUser+"> deploy everything"), 0)
	w.cardIn(chanApprovals)
	pointer := w.waitText(chanOps, "Waiting for approval in <#"+chanApprovals+">")
	waitFor(t, "both copies", func() bool { return len(w.cards()) == 3 })
	w.ad.Wait()

	allows := w.fake.ButtonValues(ActionAllow)
	ref, _ := confirm.ParseCallRef(allows[0])
	main := w.cardParts(ref.Batch, confirm.CardMain)
	copies := w.cardParts(ref.Batch, confirm.CardDM)
	var carols []string
	for _, p := range copies {
		if strings.HasPrefix(p, dmOf(carol)+"/") {
			carols = append(carols, p)
		}
	}
	if want := MessagesFor(capCalls); len(main) != want || len(copies) != 2*want || len(carols) != want {
		t.Fatalf("card in %d messages, copies in %d (carol's %d); want %d each", len(main), len(copies), len(carols), want)
	}
	var refs []string
	for _, a := range allows {
		if !slices.Contains(refs, a) {
			refs = append(refs, a)
		}
	}
	if len(refs) != capCalls {
		t.Fatalf("%d calls with Allow, want %d", len(refs), capCalls)
	}
	for i, a := range refs {
		if i%2 == 0 {
			ch, ts := w.partWith(main, a)
			w.deliverInteraction(onMessage(blockAction(alice, ch, "", ActionAllow, a), ts))
		} else {
			ch, ts := w.partWith(carols, a)
			w.deliverInteraction(onMessage(blockAction(carol, ch, "", ActionAllow, a), ts))
		}
	}
	w.waitText(chanOps, "Deployed all, routed.")
	w.ad.Wait()
	if n := w.tools["deploy"].runs.Load(); n != capCalls {
		t.Fatalf("deploy ran %d times, want %d", n, capCalls)
	}
	if n := len(w.audit(confirm.AuditRejectedClick)); n != 0 {
		t.Fatalf("%d clicks refused", n)
	}
	waitFor(t, "every card message synced", func() bool {
		n, err := w.db.CardsBehind(context.Background())
		return err == nil && n == 0
	})
	for _, p := range append(main, copies...) {
		if text, buttons := w.shownBlocks(p); len(buttons) != 0 || strings.Contains(text, "hourglass_flowing_sand") {
			t.Errorf("message %s is not final (%d buttons)", p, len(buttons))
		}
	}
	if text, _ := w.shownBlocks(CardRef(chanOps, pointer.TS)); !strings.Contains(text, "closed") {
		t.Errorf("the pointer is not closed:\n%s", text)
	}
	if r := w.refusedBySlack(); len(r) != 0 {
		t.Fatalf("Slack refused %v", r)
	}
}

// Allow all, on the last message of a card at the cap, allows every call
// on every message: the batch runs whole and every message ends final.
func TestAllowAllAtTheCapOverSlack(t *testing.T) {
	w := newWorld(t, ModeHTTP)
	w.pushCap(capCalls, func(i int) string { return fmt.Sprintf(`{"service":"svc-%02d"}`, i) }, "Deployed all at once.")
	w.deliverEvent(mention(w.eventID(), chanOps, bob, mentionTS, "", "<@"+botUser+"> deploy everything"), 0)
	w.waitCard(1)
	w.ad.Wait()
	all := w.fake.ButtonValues(ActionAllowAll)
	if len(all) != 1 {
		t.Fatalf("%d Allow all buttons, want 1", len(all))
	}
	ref, _ := confirm.ParseCallRef(w.fake.ButtonValues(ActionAllow)[0])
	parts := w.cardParts(ref.Batch, confirm.CardMain)
	if ch, ts := w.partWith(parts, all[0]); CardRef(ch, ts) != parts[len(parts)-1] {
		t.Fatalf("Allow all is on %s, want the card's last message %s", CardRef(ch, ts), parts[len(parts)-1])
	}
	w.deliverInteraction(blockAction(alice, chanOps, mentionTS, ActionAllowAll, all[0]))
	w.waitText(chanOps, "Deployed all at once.")
	w.ad.Wait()
	if n := w.tools["deploy"].runs.Load(); n != capCalls {
		t.Fatalf("deploy ran %d times, want %d", n, capCalls)
	}
	waitFor(t, "every card message synced", func() bool {
		n, err := w.db.CardsBehind(context.Background())
		return err == nil && n == 0
	})
	for i, p := range parts {
		if _, buttons := w.shownBlocks(p); len(buttons) != 0 {
			t.Errorf("message %d of the card still has buttons", i+1)
		}
	}
}
