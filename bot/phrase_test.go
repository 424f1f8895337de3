package bot_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
)

// envService renders "<env>/<service>" from a call's arguments, as
// confirm_phrase: "{{.env}}/{{.service}}" would.
func envService(args json.RawMessage) (string, error) {
	var a struct{ Env, Service string }
	if err := json.Unmarshal(args, &a); err != nil {
		return "", err
	}
	return a.Env + "/" + a.Service, nil
}

// criticalHarness has bob ask for one critical deploy of prod/api; its
// phrase is "prod/api".
func criticalHarness(t *testing.T) (*harness, card.Call) {
	t.Helper()
	h := newHarnessWith(t, "", withPolicy(nil, nil))
	h.tools["deploy"].Rating = confirm.RiskCritical
	h.tools["deploy"].PhraseOf = envService
	h.push(calls(tc("", "deploy", `{"env":"prod","service":"api"}`)), text("done"))
	h.turn("bob", "deploy api to prod")
	return h, h.plat.LastCard().Calls[0]
}

func allowWith(h *harness, user string, c card.Call, phrase string) error {
	return h.bot.Decide(context.Background(), bot.Click{Platform: "test", Channel: "C1", User: user, Ref: c.Ref,
		Message: cardMsg(c.Ref), Allow: true, Phrase: phrase})
}

// rejectedWhy lists the reasons of the rejected clicks audited for user.
func rejectedWhy(t *testing.T, h *harness, user string) []string {
	t.Helper()
	evs, err := h.store.AuditEvents(context.Background(), confirm.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		if e.Kind != confirm.AuditRejectedClick || e.Actor != user {
			continue
		}
		var d struct{ Why string }
		_ = json.Unmarshal([]byte(e.Detail), &d)
		out = append(out, d.Why)
	}
	return out
}

// waiting reports whether the call is still pending at revision rev with
// no vote, as stored.
func waiting(t *testing.T, h *harness, rev int) bool {
	t.Helper()
	b, err := h.store.PendingBatch(context.Background(), 1)
	if err != nil {
		return false
	}
	c := b.Calls[0]
	return c.Decision == confirm.DecisionPending && c.Revision == rev && len(c.Votes) == 0
}

// An Allow of a critical call without its phrase (a forged or replayed
// click that skipped the prompt) and with a wrong one changes nothing
// and is audited; the right one, with white space around it, runs the
// call once; a second Allow finds it decided.
func TestCriticalAllowNeedsItsPhrase(t *testing.T) {
	h, c := criticalHarness(t)
	if c.Risk != confirm.RiskCritical || !card.Offers(h.plat.LastCard().Actions(c, nil), card.ActAllowTyped) {
		t.Fatalf("card call %+v: want critical with Allow…", c)
	}
	if err := allowWith(h, "alice", c, ""); !errors.Is(err, bot.ErrPhraseRequired) {
		t.Fatalf("Allow without a phrase: %v", err)
	}
	for _, wrong := range []string{"Prod/api", "prod/ap", "deploy", "prod/api extra"} {
		if err := allowWith(h, "alice", c, wrong); !errors.Is(err, bot.ErrWrongPhrase) {
			t.Fatalf("Allow with %q: %v", wrong, err)
		}
	}
	if n := h.tools["deploy"].Runs.Load(); n != 0 || !waiting(t, h, 0) {
		t.Fatalf("a missing or wrong phrase changed something: %d runs, waiting %v", n, waiting(t, h, 0))
	}
	why := strings.Join(rejectedWhy(t, h, "alice"), ",")
	if !strings.Contains(why, "confirmation phrase missing") || !strings.Contains(why, "wrong confirmation phrase") {
		t.Fatalf("audited refusals: %q", why)
	}
	for _, err := range []error{bot.ErrPhraseRequired, bot.ErrWrongPhrase} {
		if msg := bot.UserMessage(err); !bot.IsRefusal(err) || !strings.Contains(msg, "Nothing changed.") || strings.Contains(msg, "prod/api") {
			t.Fatalf("%v: refusal %v, message %q", err, bot.IsRefusal(err), msg)
		}
	}
	if err := allowWith(h, "alice", c, "  prod/api \n"); err != nil {
		t.Fatalf("Allow with the phrase: %v", err)
	}
	if n := h.tools["deploy"].Runs.Load(); n != 1 {
		t.Fatalf("runs after the right phrase: %d", n)
	}
	if err := allowWith(h, "alice", c, "prod/api"); !errors.Is(err, bot.ErrAlreadyClosed) {
		t.Fatalf("a second Allow: %v", err)
	}
	if n := h.tools["deploy"].Runs.Load(); n != 1 {
		t.Fatalf("runs after a second Allow: %d", n)
	}
}

// Deny needs no phrase; a grant click is refused as for any high tier.
func TestCriticalDenyNeedsNoPhrase(t *testing.T) {
	h, c := criticalHarness(t)
	grant := bot.Click{Platform: "test", Channel: "C1", User: "alice", Ref: c.Ref, Message: cardMsg(c.Ref), Allow: true, Grant: true, Phrase: "prod/api"}
	if err := h.bot.Decide(context.Background(), grant); !errors.Is(err, bot.ErrNotGrantable) {
		t.Fatalf("grant: %v", err)
	}
	if err := h.click("alice", 1, false, "not now"); err != nil {
		t.Fatalf("Deny: %v", err)
	}
	if h.tools["deploy"].Runs.Load() != 0 || h.plat.LastCard().Calls[0].Open() {
		t.Fatal("deny did not decide the call")
	}
}

// A stranger is refused before any phrase is looked at: PhraseFor tells
// them nothing of the phrase, and their Allow with the right phrase is
// audited as not an approver's. The requester may not allow it either.
// An approver learns the phrase; a call that is not critical needs none.
func TestPhraseForChecksTheClickerFirst(t *testing.T) {
	h, c := criticalHarness(t)
	ctx := context.Background()
	click := bot.Click{Platform: "test", Channel: "C1", User: "mallory", Ref: c.Ref, Message: cardMsg(c.Ref)}
	if p, needed, err := h.bot.PhraseFor(ctx, click); !errors.Is(err, bot.ErrNotApprover) || needed || p.Phrase != "" {
		t.Fatalf("stranger's PhraseFor: %+v %v %v", p, needed, err)
	}
	if err := allowWith(h, "mallory", c, "prod/api"); !errors.Is(err, bot.ErrNotApprover) {
		t.Fatalf("stranger's Allow: %v", err)
	}
	for _, why := range rejectedWhy(t, h, "mallory") {
		if strings.Contains(why, "phrase missing") || strings.Contains(why, "wrong confirmation") {
			t.Fatalf("a stranger's click reached the phrase check: %q", why)
		}
	}
	click.User = "bob" // the requester
	if _, _, err := h.bot.PhraseFor(ctx, click); !errors.Is(err, bot.ErrSelfApproval) {
		t.Fatalf("requester's PhraseFor: %v", err)
	}
	forged := click
	forged.User, forged.Message = "alice", "card-elsewhere"
	if _, _, err := h.bot.PhraseFor(ctx, forged); !errors.Is(err, bot.ErrWrongChannel) {
		t.Fatalf("PhraseFor from another message: %v", err)
	}
	click.User = "alice"
	p, needed, err := h.bot.PhraseFor(ctx, click)
	if err != nil || !needed || p.Phrase != "prod/api" || p.Tool != "deploy" || p.Number != 1 || p.Text() != "Type prod/api to allow deploy" {
		t.Fatalf("approver's PhraseFor: %+v %v %v", p, needed, err)
	}
	if h.tools["deploy"].Runs.Load() != 0 || !waiting(t, h, 0) {
		t.Fatal("PhraseFor changed something")
	}

	h2 := newHarnessWith(t, "", withPolicy(nil, nil))
	h2.push(calls(tc("", "deploy", `{}`)))
	h2.turn("bob", "deploy")
	c2 := h2.plat.LastCard().Calls[0]
	if _, needed, err := h2.bot.PhraseFor(ctx, bot.Click{Platform: "test", Channel: "C1", User: "alice", Ref: c2.Ref, Message: cardMsg(c2.Ref)}); err != nil || needed {
		t.Fatalf("medium call: needed %v, %v", needed, err)
	}
	if err := h2.click("alice", 1, true, ""); err != nil || h2.tools["deploy"].Runs.Load() != 1 {
		t.Fatalf("a medium call's Allow without a phrase: %v", err)
	}
}

// The phrase is the one of the arguments that will run: an edit of a
// critical call does not allow it (it waits for its phrase), and the
// phrase then comes from the edited arguments.
func TestPhraseComesFromEditedArguments(t *testing.T) {
	h, c := criticalHarness(t)
	ctx := context.Background()
	edit := bot.Click{Platform: "test", Channel: "C1", User: "alice", Ref: c.Ref, Message: cardMsg(c.Ref), Allow: true}
	if form, err := h.bot.EditForm(ctx, edit); err != nil || !form.Holds {
		t.Fatalf("the edit form of a critical call: %+v %v; want Holds", form, err)
	}
	if err := h.bot.Edit(ctx, edit, `{"env":"staging","service":"api"}`); err != nil {
		t.Fatalf("edit: %v", err)
	}
	if h.tools["deploy"].Runs.Load() != 0 || !waiting(t, h, 1) {
		t.Fatal("an edit allowed a critical call without its phrase")
	}
	edited := h.plat.LastCard().Calls[0]
	if edited.Ref == c.Ref || !edited.Open() {
		t.Fatalf("the card after the edit: %+v", edited)
	}
	p, needed, err := h.bot.PhraseFor(ctx, bot.Click{Platform: "test", Channel: "C1", User: "alice", Ref: edited.Ref, Message: cardMsg(edited.Ref)})
	if err != nil || !needed || p.Phrase != "staging/api" {
		t.Fatalf("phrase after the edit: %+v %v %v", p, needed, err)
	}
	if err := allowWith(h, "alice", edited, "prod/api"); !errors.Is(err, bot.ErrWrongPhrase) {
		t.Fatalf("the model's arguments' phrase after the edit: %v", err)
	}
	if err := allowWith(h, "alice", c, "staging/api"); !errors.Is(err, bot.ErrStaleRevision) {
		t.Fatalf("the old button: %v", err)
	}
	if err := allowWith(h, "alice", edited, "staging/api"); err != nil {
		t.Fatalf("Allow with the edited phrase: %v", err)
	}
	if n := h.tools["deploy"].Runs.Load(); n != 1 || h.tools["deploy"].Args[0] != `{"env":"staging","service":"api"}` {
		t.Fatalf("runs %d, args %v", n, h.tools["deploy"].Args)
	}
}

// Hostile arguments: the phrase is shown inert (no controls, bidi or
// zero-width characters, one line) and capped; a mention stays plain
// characters for the renderers to show literally. A phrase that renders
// empty, fails, or would show a secret is the tool's name.
func TestPhraseOfHostileArguments(t *testing.T) {
	cases := []struct {
		name, render string
		err          error
		want         func(string) bool
	}{
		{"mention", "<!channel> `x`\u202e\u200b\n\t@everyone\x1b[31m", nil, func(p string) bool {
			return p == "<!channel> `x` @everyone[31m"
		}},
		{"long", strings.Repeat("ab", 100), nil, func(p string) bool {
			return utf8.RuneCountInString(p) == bot.MaxPhraseRunes && strings.HasPrefix(p, "abab")
		}},
		{"empty", " \u200b\n ", nil, func(p string) bool { return p == "deploy" }},
		{"failed", "", errors.New("missing key"), func(p string) bool { return p == "deploy" }},
		{"secret", "prod/sk-SECRETSECRET", nil, func(p string) bool { return p == "deploy" }},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarnessWith(t, "", withPolicy(nil, func(c *bot.Config) {
				c.Redact = func(s string) string { return strings.ReplaceAll(s, "sk-SECRETSECRET", "[redacted]") }
			}))
			h.tools["deploy"].Rating = confirm.RiskCritical
			h.tools["deploy"].PhraseOf = func(json.RawMessage) (string, error) { return tt.render, tt.err }
			h.push(calls(tc("", "deploy", `{}`)), text("done"))
			h.turn("bob", "deploy")
			c := h.plat.LastCard().Calls[0]
			p, needed, err := h.bot.PhraseFor(context.Background(), bot.Click{Platform: "test", Channel: "C1", User: "alice", Ref: c.Ref, Message: cardMsg(c.Ref)})
			if err != nil || !needed || !tt.want(p.Phrase) {
				t.Fatalf("phrase %q (needed %v, %v)", p.Phrase, needed, err)
			}
			if err := allowWith(h, "alice", c, p.Phrase); err != nil || h.tools["deploy"].Runs.Load() != 1 {
				t.Fatalf("the shown phrase typed back: %v", err)
			}
		})
	}
}

// A runbook step whose tool is critical posts the same card, and its
// Allow goes through the same check: without the phrase (the tool's name,
// as it sets none) nothing runs; with it the step runs once and the run
// goes on.
func TestRunbookCriticalStepNeedsThePhrase(t *testing.T) {
	h := newRBHarness(t, nil)
	h.extra["restart"].risk = confirm.RiskCritical
	id := h.start(restartBook(), "bob")
	c := h.plat.LastCard().Calls[0]
	if c.Tool != "restart" || c.Risk != confirm.RiskCritical || !card.Offers(h.plat.LastCard().Actions(c, nil), card.ActAllowTyped) {
		t.Fatalf("step card call %+v: want a critical restart with Allow…", c)
	}
	if err := h.clickLast("alice", true); !errors.Is(err, bot.ErrPhraseRequired) {
		t.Fatalf("Allow without the phrase: %v", err)
	}
	if err := allowWith(h.harness, "alice", c, "Restart"); !errors.Is(err, bot.ErrWrongPhrase) {
		t.Fatalf("Allow with a wrong phrase: %v", err)
	}
	h.settle()
	if _, steps := h.run(id); stepLine(steps) != "before/1:succeeded restart/1:waiting" || len(h.extra["restart"].runs()) != 0 {
		t.Fatalf("a refused Allow moved the run: %s", stepLine(steps))
	}
	if err := allowWith(h.harness, "alice", c, "restart"); err != nil {
		t.Fatalf("Allow with the phrase: %v", err)
	}
	h.settle()
	r, steps := h.run(id)
	if r.Status != confirm.RunbookSucceeded || len(h.extra["restart"].runs()) != 1 {
		t.Fatalf("after the phrase: %s %s, restart ran %v", r.Status, stepLine(steps), h.extra["restart"].runs())
	}
}
