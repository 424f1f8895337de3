package shell

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock/adapters/internal/visible"
	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/internal/testkit"
)

var update = flag.Bool("update", false, "rewrite golden files")

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Fatalf("%s differs:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func sampleCard() card.Card {
	at := time.Date(2026, 11, 29, 16, 5, 0, 0, time.UTC)
	return card.Card{
		BatchID:     "abcdefghijklmnop",
		Intro:       "I'll check the status,\nthen restart the API.",
		RequestedBy: "local",
		Approvers:   confirm.Approvers{Users: []string{"local", "oncall"}},
		ExpiresAt:   at.Add(30 * time.Minute),
		// The terminal's one person approves their own calls.
		SelfApproval: true,
		Calls: []card.Call{
			{Ref: "abcdefghijklmnop.0", Number: 1, Key: "#0", Tool: "service_status", Summary: "Read the status of api", Args: "{\n  \"service\": \"api\"\n}", State: card.State{Kind: card.AllowedByPolicy}},
			{Ref: "abcdefghijklmnop.1", Number: 2, Key: "#1", Tool: "restart_service", Summary: "Restart api in production", Args: "{\n  \"environment\": \"production\",\n  \"service\": \"api\"\n}", Flagged: true, Approvals: 1, Reasons: []confirm.Reason{{Kind: confirm.ReasonToolFlag}}, State: card.State{Kind: card.Waiting}},
		},
	}
}

func TestRenderGolden(t *testing.T) {
	c := sampleCard()
	golden(t, "card_pending.txt", Render(c))

	at := time.Date(2026, 11, 29, 16, 6, 0, 0, time.UTC)
	c.Calls[0].Run = confirm.RunSucceeded
	c.Calls[1].State = card.State{Kind: card.Denied, By: "local", At: &at, Reason: "not during the incident"}
	golden(t, "card_decided.txt", Render(c))

	r := sampleCard()
	r.Calls[1].Risk = confirm.RiskCritical
	golden(t, "card_risk.txt", Render(r))
}

// A runbook step's card says which step of which runbook, started by
// whom, and nothing in the agent's name.
func TestRenderRunbookStepGolden(t *testing.T) {
	c := sampleCard()
	c.Intro = ""
	c.Calls = c.Calls[1:]
	c.Calls[0].Number = 1
	c.Step = &card.Step{Runbook: "restart", ID: "restart", StartedBy: "local", Attempt: 1, Attempts: 5}
	golden(t, "card_runbook_step.txt", Render(c))
}

// hostileCard: the model's words, a read-back, arguments, a deny reason
// and a tool's output try to drive the terminal (clear the screen, move
// the cursor, set the title, recolour), reorder text with bidi controls,
// hide characters, and flood the screen with arguments.
func hostileCard() card.Card {
	at := time.Date(2026, 11, 29, 16, 6, 0, 0, time.UTC)
	c := sampleCard()
	c.Intro = "All fine\x1b[2J\x1b[H\x1b]0;pwned\x07 \u202egnp.exe"
	c.Calls[0].Run, c.Calls[0].Result = confirm.RunFailed, "boom\x1b[31m red \u009b0m\r overwritten"
	c.Calls[1].Summary = "Restart api\u202e noitcudorp\u200b <!channel> <@123456789012345678> @everyone [x](http://evil) ||x|| :skull:"
	c.Calls[1].Args = "{\n  \"note\": \"\x1b[1A\x1b[2K\u202e```" + strings.Repeat("x", 2500) + "\",\n  \"service\": \"api\"\n}"
	c.Calls[1].Reasons = []confirm.Reason{{Kind: confirm.ReasonUnknownOutcome}}
	c.Calls = append(c.Calls, card.Call{Ref: "abcdefghijklmnop.2", Number: 3, Key: "#2", Tool: "drop\x1b[8m_table", Summary: "Drop table users", Args: "{}",
		Flagged: true, Approvals: 1, State: card.State{Kind: card.Denied, By: "local", At: &at, Reason: "no\u001b[2J\u2066 way"}})
	return c
}

func TestHostileCardIsInert(t *testing.T) {
	hostile := hostileCard()
	out := renderGolden(t, "card_hostile.txt", hostile)
	testkit.ContainsAll(t, "card", out, `\u001b[2J`, `\u202egnp.exe`, `api\u202e noitcudorp\u200b`, "more characters hidden; /args 2 shows them all.", "needs approval: an earlier call of this tool has an unknown outcome")
	if n := strings.Count(out, "\n"); n > 60 {
		t.Errorf("a card of %d lines", n)
	}

	var term strings.Builder
	s := New(strings.NewReader(""), &term)
	s.Post(context.Background(), bot.Thread{}, "done\x1b[2J\x1b]0;t\x07 \u202eevil 👩\u200d💻")
	if got := term.String(); got != "airlock: done\\u001b[2J\\u001b]0;t\\u0007 \\u202eevil 👩\u200d💻\n" {
		t.Errorf("Post printed %q", got)
	}
	term.Reset()
	c := hostile
	c.Calls[1].State = card.State{Kind: card.Denied, By: "local", At: c.Calls[2].State.At, Reason: "\x1b[2Jgone"}
	s.UpdateCard(context.Background(), bot.Thread{}, c.BatchID, c)
	inert(t, "in an update", term.String())
}

func TestArgsPrintsWholeArguments(t *testing.T) {
	hostile := hostileCard()
	b := &fakeBot{card: &hostile}
	out := runShell(t, b, "/args 2\n/args 7\n")
	want := strings.ReplaceAll(strings.ReplaceAll(hostile.Calls[1].Args, "\x1b", `\u001b`), "\u202e", `\u202e`)
	if !strings.Contains(out, "Arguments of call 2, restart_service:\n"+want+"\n") {
		t.Fatalf("/args 2 printed:\n%s", out)
	}
	if !strings.Contains(out, `"7" is not a call number of the card (1-3)`) || len(b.clicks) != 0 {
		t.Fatalf("output:\n%s", out)
	}
}

// fakeBot records what the shell asked of it.
type fakeBot struct {
	mu      sync.Mutex
	card    *card.Card
	turns   []string
	clicks  []bot.Click
	forms   []bot.Click // EditForm clicks
	edits   []edit
	extends []bot.Click
	form    bot.EditForm
	err     error  // returned by EditForm, Edit and Extend
	phrase  string // what PhraseFor asks typed; "": none
}

type edit struct {
	click bot.Click
	args  string
}

func (f *fakeBot) EditForm(_ context.Context, c bot.Click) (bot.EditForm, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.forms = append(f.forms, c)
	return f.form, f.err
}

func (f *fakeBot) Edit(_ context.Context, c bot.Click, args string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.edits = append(f.edits, edit{c, args})
	return f.err
}

func (f *fakeBot) Extend(_ context.Context, c bot.Click) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.extends = append(f.extends, c)
	return f.err
}

// asked is everything the shell asked of the bot besides reading the card.
func (f *fakeBot) asked() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.turns) + len(f.clicks) + len(f.forms) + len(f.edits) + len(f.extends)
}

func (f *fakeBot) HandleTurn(_ context.Context, t bot.Turn) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.turns = append(f.turns, t.Text)
	return nil
}

func (f *fakeBot) Decide(_ context.Context, c bot.Click) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.clicks = append(f.clicks, c)
	return nil
}

func (f *fakeBot) PhraseFor(_ context.Context, c bot.Click) (bot.PhrasePrompt, bool, error) {
	if f.phrase == "" {
		return bot.PhrasePrompt{}, false, nil
	}
	return bot.PhrasePrompt{Ref: c.Ref, Phrase: f.phrase, Tool: "deploy"}, true, nil
}

func (f *fakeBot) DecideAll(_ context.Context, c bot.Click) (bot.AllResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.clicks = append(f.clicks, c)
	return bot.AllResult{Allow: c.Allow, Decided: 1}, nil
}

// Interact is the real dispatch over the fake's answers.
func (f *fakeBot) Interact(ctx context.Context, in bot.Interaction) (bot.Reply, error) {
	return bot.Dispatch(ctx, f, in)
}

func (f *fakeBot) Revoke(context.Context, bot.Click) error { return f.err }
func (f *fakeBot) RunAction(context.Context, bot.Click, card.ActionKind) error {
	return f.err
}
func (f *fakeBot) ClickedCard(ctx context.Context, _ bot.Click) (*card.Card, error) {
	return f.PendingCard(ctx, bot.Thread{})
}

func (f *fakeBot) PendingCard(context.Context, bot.Thread) (*card.Card, error) {
	if f.card == nil {
		return nil, confirm.ErrNotFound
	}
	c := *f.card
	return &c, nil
}

func (f *fakeBot) PendingCards(ctx context.Context, th bot.Thread) ([]card.Card, error) {
	c, err := f.PendingCard(ctx, th)
	if err != nil {
		return nil, err
	}
	return []card.Card{*c}, nil
}

// renderGolden renders c, checks it against the golden file name, and
// that nothing in it would act unseen on a terminal.
func renderGolden(t *testing.T, name string, c card.Card) string {
	t.Helper()
	out := Render(c)
	golden(t, name, out)
	inert(t, "reached the terminal", out)
	return out
}

// inert fails t when s holds a character that would act unseen on a
// terminal (visible.Hidden); what says where s was printed.
func inert(t *testing.T, what, s string) {
	t.Helper()
	for _, r := range s {
		if visible.Hidden(r) {
			t.Fatalf("raw %U %s: %q", r, what, s)
		}
	}
}

func runShell(t *testing.T, b Bot, input string) string {
	t.Helper()
	var out strings.Builder
	s := New(strings.NewReader(input), &out)
	if err := s.Run(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

func TestCommands(t *testing.T) {
	card := sampleCard()
	card.AllRef = "all-abcdefghijklmnop.0"
	b := &fakeBot{card: &card}
	out := runShell(t, b, "hello there\n/allow 2\n/deny 2 not now please\n/deny all off hours\n/allow 1\n/allow 9\n/allow x\n/frob\n/help\n/quit\nnever read\n")
	if len(b.turns) != 1 || b.turns[0] != "hello there" {
		t.Fatalf("turns: %v", b.turns)
	}
	// Message is the reference PostCard returned for the card: its batch id.
	want := []bot.Click{
		{Platform: Platform, Channel: DefaultChannel, Message: "abcdefghijklmnop", User: DefaultUser, Ref: "abcdefghijklmnop.1", Allow: true},
		{Platform: Platform, Channel: DefaultChannel, Message: "abcdefghijklmnop", User: DefaultUser, Ref: "abcdefghijklmnop.1", Reason: "not now please"},
		{Platform: Platform, Channel: DefaultChannel, Message: "abcdefghijklmnop", User: DefaultUser, Ref: "all-abcdefghijklmnop.0", Reason: "off hours"},
	}
	if len(b.clicks) != len(want) {
		t.Fatalf("clicks: %+v", b.clicks)
	}
	for i := range want {
		if !reflect.DeepEqual(b.clicks[i], want[i]) {
			t.Fatalf("click %d: %+v, want %+v", i, b.clicks[i], want[i])
		}
	}
	testkit.ContainsAll(t, "output", out,
		"A card is still waiting from before",
		"Denied 1 call.",
		"Call 1 is not waiting for a decision",
		`"9" is not a call number of the card (1-2)`,
		`"x" is not a call number`,
		"Unknown command /frob",
		"/deny N [reason]    deny call N",
		"/edit N {JSON}      allow call N with these arguments instead",
		"/extend             push the waiting card's deadline",
	)
}

func TestNoCardWaiting(t *testing.T) {
	b := &fakeBot{}
	out := runShell(t, b, "/allow 1\n/card\n")
	if strings.Count(out, "No card is waiting.") != 2 || len(b.clicks) != 0 {
		t.Fatalf("output:\n%s", out)
	}
}

type failingBot struct{ fakeBot }

func (f *failingBot) Decide(context.Context, bot.Click) error { return bot.ErrAlreadyClosed }
func (f *failingBot) Interact(ctx context.Context, in bot.Interaction) (bot.Reply, error) {
	return bot.Dispatch(ctx, f, in)
}

func TestDecideErrorsShowSafeMessage(t *testing.T) {
	card := sampleCard()
	b := &failingBot{fakeBot{card: &card}}
	out := runShell(t, b, "/allow 2\n")
	if !strings.Contains(out, "Call 2: "+bot.UserMessage(bot.ErrAlreadyClosed)) {
		t.Fatalf("output:\n%s", out)
	}
}

func TestUpdatePrintsOnlyChanges(t *testing.T) {
	var out strings.Builder
	s := New(strings.NewReader(""), &out)
	c := sampleCard()
	if _, err := s.PostCard(context.Background(), bot.Thread{}, c); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	at := time.Date(2026, 11, 29, 16, 6, 0, 0, time.UTC)
	c.Calls[1].State = card.State{Kind: card.Allowed, By: "local", At: &at}
	if err := s.UpdateCard(context.Background(), bot.Thread{}, c.BatchID, c); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), "  request abcdefgh [2] restart_service: allowed by local at 16:06:00 UTC\n"; got != want {
		t.Fatalf("update printed %q, want %q", got, want)
	}
}

// routedCard is the sample card with the issue 13 parts: call 2 was
// edited by an approver (the changed values are hostile: escapes that
// would clear the screen, bidi controls that would reorder it, a fake
// arrow), call 3 waits and may be edited, the card was extended and has
// two escalation steps, the first fired.
func routedCard() card.Card {
	c := sampleCard()
	at := time.Date(2026, 11, 29, 16, 5, 0, 0, time.UTC)
	c.Calls[1].Summary = "Restart api in staging"
	c.Calls[1].Args = "{\n  \"environment\": \"staging\",\n  \"note\": \"\x1b[2J\u202eok\",\n  \"service\": \"api\"\n}"
	c.Calls[1].Edited = &card.Edit{By: "oncall\x1b[8m", At: at.Add(3 * time.Minute), Changes: []card.Change{
		{Key: "environment", Before: `"production"`, After: `"staging"`},
		{Key: "note\u202e", Before: "", After: "\"\x1b[2J\u202eok\\n → \u2066\""},
		{Key: "a: 1 → 2, b", Before: "1", After: "2"},
		{Key: "replicas", Before: "120", After: ""},
	}}
	c.Calls = append(c.Calls, card.Call{Ref: "abcdefghijklmnop.2", Number: 3, Key: "#2", Tool: "scale", Summary: "Scale web to 120", Args: "{\n  \"replicas\": 120\n}",
		Flagged: true, Approvals: 1, Reasons: []confirm.Reason{{Kind: confirm.ReasonToolFlag}}, State: card.State{Kind: card.Waiting}, Editable: true})
	c.ExtendRef, c.ExtendBy = "abcdefghijklmnop.2", 30*time.Minute
	c.Extended = &card.Extension{By: "oncall", At: at.Add(20 * time.Minute)}
	c.ExpiresAt = at.Add(60 * time.Minute)
	c.Escalations = []card.Escalation{
		{At: at.Add(10 * time.Minute), Mention: confirm.Approvers{Groups: []string{"S0LEADS"}, Roles: []string{"222"}}, Fired: true},
		{At: at.Add(20 * time.Minute), Mention: confirm.Approvers{Users: []string{"U0BOSS"}}, Approvers: confirm.Approvers{Users: []string{"U0BOSS"}, Groups: []string{"S0LEADS"}}},
	}
	c.ThreadLink, c.Copy = "https://example.slack.com/archives/C1/p1", card.CopyApprovals
	return c
}

func TestRenderRoutedGolden(t *testing.T) {
	c := routedCard()
	out := renderGolden(t, "card_routed.txt", c)
	testkit.ContainsAll(t, "card", out,
		"| [2] restart_service: Restart api in staging\n|     Edited by oncall\\u001b[8m at 16:08:00 UTC. The read-back and arguments shown are the edited ones; it runs with them. Changed:\n",
		`|       environment: "production" → "staging"`,
		`|       "note\u202e": (not set) → "\u001b[2J\u202eok\n → \u2066"`,
		`|       "a: 1 → 2, b": 1 → 2`,
		"|       replicas: 120 → (not set)",
		"|     /edit 3: Edit the arguments of call 3, then allow it",
		"| Extended by oncall at 16:25:00 UTC; now expires at 17:05 UTC.",
		"| Escalated at 16:15 UTC: mentioned group S0LEADS, role 222.",
		"| Escalates at 16:25 UTC: will mention U0BOSS; may then also decide: U0BOSS, group S0LEADS.\n",
		"/args N  /edit N\n",
	)
	if strings.Contains(out, "/edit 2") || strings.Contains(out, "/extend") || strings.Contains(out, "slack.com") {
		t.Errorf("an edited call offers /edit, an extended card /extend, or a thread link printed:\n%s", out)
	}

	// Not extended yet: /extend is offered, with how long it adds.
	c.Extended = nil
	out = Render(c)
	if !strings.Contains(out, "| /extend: Push this card's deadline back, once: extend 30m\n") || !strings.HasSuffix(out, "/edit N  /extend\n") {
		t.Errorf("extend hint:\n%s", out)
	}

	// Decided: the edit and what happened stay; hints and unfired steps go.
	c = routedCard()
	decided := time.Date(2026, 11, 29, 16, 40, 0, 0, time.UTC)
	c.Calls[1].State = card.State{Kind: card.Allowed, By: "oncall", At: &decided}
	c.Calls[2].State = card.State{Kind: card.Denied, By: "oncall", At: &decided}
	golden(t, "card_routed_decided.txt", Render(c))
}

func TestEditChangesAreBounded(t *testing.T) {
	c := sampleCard()
	var changes []card.Change
	for i := 0; i < 40; i++ {
		changes = append(changes, card.Change{Key: fmt.Sprintf("k%02d", i), Before: strings.Repeat("a", 5000), After: "1"})
	}
	c.Calls[1].Edited = &card.Edit{By: "oncall", Changes: changes}
	out := Render(c)
	if !strings.Contains(out, "… and 30 more changed keys") || strings.Contains(out, "k10:") || strings.Contains(out, strings.Repeat("a", 121)) {
		t.Fatalf("edit not bounded:\n%s", out)
	}
	if n := strings.Count(out, "\n"); n > 40 {
		t.Fatalf("a card of %d lines", n)
	}

	var term strings.Builder
	s := New(strings.NewReader(""), &term)
	s.UpdateCard(context.Background(), bot.Thread{}, c.BatchID, c)
	if got := term.String(); !strings.Contains(got, "k09: "+strings.Repeat("a", 120)+"… → 1, … and 30 more changed keys — ") || len(got) > 3000 {
		t.Fatalf("update not bounded: %q", got)
	}
}

func TestEditCommand(t *testing.T) {
	c := routedCard()
	b := &fakeBot{card: &c}
	out := runShell(t, b, "/edit 3   {\"replicas\": 12, \"note\": \"a  b\"}  \n")
	want := edit{
		click: bot.Click{Platform: Platform, Channel: DefaultChannel, Message: "abcdefghijklmnop", User: DefaultUser, Ref: "abcdefghijklmnop.2"},
		args:  `{"replicas": 12, "note": "a  b"}`,
	}
	if len(b.edits) != 1 || !reflect.DeepEqual(b.edits[0], want) || len(b.clicks) != 0 {
		t.Fatalf("edits %+v, clicks %+v; output:\n%s", b.edits, b.clicks, out)
	}
}

func TestEditCommandRefusesBadInput(t *testing.T) {
	c := routedCard()
	b := &fakeBot{card: &c}
	out := runShell(t, b, "/edit\n/edit x {\"a\":1}\n/edit 0 {}\n/edit 9 {}\n/edit 3{}\n/edit 1 {}\n/edit 2 {}\n/edit \x1b[2J {}\n")
	if n := b.asked(); n != 0 {
		t.Fatalf("the bot was asked %d times; output:\n%s", n, out)
	}
	testkit.ContainsAll(t, "output", out,
		EditUsage,
		`"x" is not a call number of the card (1-3).`,
		`"0" is not a call number`,
		`"9" is not a call number`,
		`"3{}" is not a call number`,
		"Call 1 is not waiting for a decision",
		"Call 2's arguments can't be edited here",
		`"\\u001b[2J" is not a call number`,
	)
	if strings.Count(out, EditUsage) != 6 || strings.ContainsRune(out, '\x1b') {
		t.Fatalf("output:\n%s", out)
	}

	b = &fakeBot{}
	if out := runShell(t, b, "/edit 1 {}\n/extend\n"); strings.Count(out, "No card is waiting.") != 2 || b.asked() != 0 {
		t.Fatalf("output:\n%s", out)
	}
}

func TestEditRefusalIsPrinted(t *testing.T) {
	c := routedCard()
	b := &fakeBot{card: &c, err: fmt.Errorf("edit: %w", &bot.EditError{Message: "replicas: must be at most 50, not \"\x1b[2J\u202e99\""})}
	out := runShell(t, b, "/edit 3 {\"replicas\": \"\\u001b[2J99\"}\n")
	if !strings.Contains(out, `Call 3: edit refused: replicas: must be at most 50, not "\u001b[2J\u202e99". Nothing changed.`) {
		t.Fatalf("output:\n%s", out)
	}
	if strings.ContainsRune(out, '\x1b') || strings.ContainsRune(out, '\u202e') {
		t.Fatalf("raw controls printed: %q", out)
	}

	b.err = bot.ErrNotApprover
	out = runShell(t, b, "/edit 3 {}\n")
	if !strings.Contains(out, "Call 3: "+bot.UserMessage(bot.ErrNotApprover)) {
		t.Fatalf("output:\n%s", out)
	}
}

func TestEditFormShowsArguments(t *testing.T) {
	c := routedCard()
	b := &fakeBot{card: &c, form: bot.EditForm{Ref: "abcdefghijklmnop.2", Number: 3, Tool: "scale", Summary: "Scale web to 120\u202e",
		Args: "{\n  \"note\": \"\x1b]0;t\x07\",\n  \"replicas\": 120\n}"}}
	out := runShell(t, b, "/edit 3\n")
	wantClick := bot.Click{Platform: Platform, Channel: DefaultChannel, Message: "abcdefghijklmnop", User: DefaultUser, Ref: "abcdefghijklmnop.2"}
	if len(b.forms) != 1 || !reflect.DeepEqual(b.forms[0], wantClick) || len(b.edits) != 0 {
		t.Fatalf("forms %+v edits %+v", b.forms, b.edits)
	}
	testkit.ContainsAll(t, "output", out,
		"You are editing call 3, scale: Scale web to 120\\u202e\nSubmitting counts as your Allow of the edited call. Earlier approvals of this call no longer count: they approved other arguments. The original arguments stay in the audit log.\n{\n  \"note\": \"\\u001b]0;t\\u0007\",\n  \"replicas\": 120\n}\n",
		"/edit 3 {\"note\":\"\\u001b]0;t\\u0007\",\"replicas\":120}\n",
		EditUsage,
	)
	inert(t, "printed", out)
	// The line to copy is the exact arguments: its escapes mean the same
	// characters in JSON.
	line := out[strings.Index(out, "/edit 3 {")+len("/edit 3 "):]
	line = line[:strings.Index(line, "\n")]
	var got map[string]any
	if err := json.Unmarshal([]byte(line), &got); err != nil || got["note"] != "\x1b]0;t\x07" || got["replicas"] != 120.0 || len(got) != 2 {
		t.Fatalf("the /edit line %q is not the arguments: %v %v", line, got, err)
	}

	b.err = bot.ErrAlreadyClosed
	out = runShell(t, b, "/edit 3\n")
	if !strings.Contains(out, "Call 3: "+bot.UserMessage(bot.ErrAlreadyClosed)) || strings.Contains(out, "Arguments of call") {
		t.Fatalf("output:\n%s", out)
	}
}

func TestExtendCommand(t *testing.T) {
	c := routedCard()
	c.Extended = nil
	b := &fakeBot{card: &c}
	out := runShell(t, b, "/extend now\n/extend\n")
	want := bot.Click{Platform: Platform, Channel: DefaultChannel, Message: "abcdefghijklmnop", User: DefaultUser, Ref: "abcdefghijklmnop.2"}
	if len(b.extends) != 1 || !reflect.DeepEqual(b.extends[0], want) || !strings.Contains(out, "/extend takes nothing after it.") {
		t.Fatalf("extends %+v; output:\n%s", b.extends, out)
	}

	b.err = fmt.Errorf("extend: %w", bot.ErrAlreadyExtended)
	out = runShell(t, b, "/extend\n")
	if !strings.Contains(out, bot.UserMessage(bot.ErrAlreadyExtended)) {
		t.Fatalf("output:\n%s", out)
	}

	// Already extended, or not offered: the bot is not asked.
	c.Extended = &card.Extension{By: "oncall"}
	b = &fakeBot{card: &c}
	out = runShell(t, b, "/extend\n")
	if !strings.Contains(out, "This card was already extended by oncall; it expires at 17:05:00 UTC.") || b.asked() != 0 {
		t.Fatalf("output:\n%s", out)
	}
	c.Extended, c.ExtendRef = nil, ""
	out = runShell(t, b, "/extend\n")
	if !strings.Contains(out, "This card can't be extended.") || b.asked() != 0 {
		t.Fatalf("output:\n%s", out)
	}
}

func TestPostCardReturnsBatchID(t *testing.T) {
	s := New(strings.NewReader(""), io.Discard)
	ref, err := s.PostCard(context.Background(), bot.Thread{}, sampleCard())
	if err != nil || ref != "abcdefghijklmnop" {
		t.Fatalf("ref %q, err %v", ref, err)
	}
}

func TestUpdatePrintsEditExtendEscalation(t *testing.T) {
	var out strings.Builder
	s := New(strings.NewReader(""), &out)
	c := routedCard()
	c.Calls[1].Edited, c.Extended = nil, nil
	c.Calls[1].State = card.State{Kind: card.Waiting}
	c.Escalations[0].Fired = false
	if _, err := s.PostCard(context.Background(), bot.Thread{}, c); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	u := routedCard()
	at := time.Date(2026, 11, 29, 16, 8, 0, 0, time.UTC)
	u.Calls[1].State = card.State{Kind: card.Allowed, By: "oncall", At: &at}
	s.UpdateCard(context.Background(), bot.Thread{}, u.BatchID, u)
	got := out.String()
	testkit.ContainsAll(t, "update", got,
		`  request abcdefgh [2] restart_service: Edited by oncall\u001b[8m at 16:08:00 UTC. The read-back and arguments shown are the edited ones; it runs with them. Changed: environment: "production" → "staging", "note\u202e": (not set) → "\u001b[2J\u202eok\n → \u2066", "a: 1 → 2, b": 1 → 2, replicas: 120 → (not set) — Restart api in staging`+"\n",
		"  request abcdefgh [2] restart_service: allowed by oncall at 16:08:00 UTC\n",
		"  request abcdefgh: Extended by oncall at 16:25:00 UTC; now expires at 17:05 UTC.\n",
		"  request abcdefgh: Escalated at 16:15 UTC: mentioned group S0LEADS, role 222.\n",
	)
	if strings.Count(got, "\n") != 4 {
		t.Errorf("update printed more than the changes:\n%s", got)
	}
	inert(t, "in an update", got)
	out.Reset()
	s.UpdateCard(context.Background(), bot.Thread{}, u.BatchID, u)
	if out.String() != "" {
		t.Fatalf("an unchanged card printed %q", out.String())
	}
}

// /allow N of a critical call asks for its phrase and reads the next
// line: what is typed goes to the bot as the click's phrase (the bot
// judges it); a blank line or the end of input decides nothing.
func TestAllowCriticalAsksForThePhrase(t *testing.T) {
	c := sampleCard()
	c.Calls[1].Risk = confirm.RiskCritical
	b := &fakeBot{card: &c, phrase: "prod/api"}
	out := runShell(t, b, "/allow 2\nprod/API\n/allow 2\n\n/allow 2\n")
	if strings.Count(out, "Type prod/api to allow call 2, deploy: ") != 3 || strings.Count(out, "Call 2: no phrase typed; nothing changed.") != 2 {
		t.Fatalf("output:\n%s", out)
	}
	if len(b.clicks) != 1 || b.clicks[0].Phrase != "prod/API" || !b.clicks[0].Allow {
		t.Fatalf("clicks %+v: want one Allow with the typed phrase", b.clicks)
	}
	// A call that is not critical is allowed at once.
	medium := sampleCard()
	b = &fakeBot{card: &medium, phrase: "prod/api"}
	if out := runShell(t, b, "/allow 2\n"); strings.Contains(out, "Type ") || len(b.clicks) != 1 || b.clicks[0].Phrase != "" {
		t.Fatalf("/allow 2 of a medium call: %+v\n%s", b.clicks, out)
	}
}

// A command the terminal does not know, or one naming no call of the
// waiting card, is refused with a word and asks nothing of the bot.
func TestUnknownCommandChangesNothing(t *testing.T) {
	c := sampleCard()
	b := &fakeBot{card: &c}
	out := runShell(t, b, "/frob 1\n/Allow 1\n/allow1\n/allow 9\n/deny x\n/edit 9 {}\n/extend now\n/checked 9\n/allow all now\n")
	if n := b.asked(); n != 0 {
		t.Fatalf("the bot was asked %d things; output:\n%s", n, out)
	}
	testkit.ContainsAll(t, "output", out,
		"Unknown command /frob", "Unknown command /Allow", "Unknown command /allow1",
		`"9" is not a call number of the card (1-2)`, `"x" is not a call number`,
		"/extend takes nothing after it.", "No run with an unknown outcome waits to be checked.",
		"/allow takes call numbers only.",
	)
}

func (f *fakeBot) QuestionForm(context.Context, bot.Click) (card.QuestionNotice, error) {
	return card.QuestionNotice{}, nil
}
func (f *fakeBot) AnswerQuestion(context.Context, bot.Click, []string) error { return nil }
func (f *fakeBot) DeclineQuestion(context.Context, bot.Click) error          { return nil }
