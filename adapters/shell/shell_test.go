package shell

import (
	"context"
	"flag"
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
	out := Render(hostile)
	golden(t, "card_hostile.txt", out)
	for _, r := range out {
		if visible.Hidden(r) {
			t.Fatalf("raw %U reached the terminal:\n%s", r, out)
		}
	}
	for _, want := range []string{`\u001b[2J`, `\u202egnp.exe`, `api\u202e noitcudorp\u200b`, "more characters hidden; /args 2 prints them all", "needs approval: an earlier equal call's outcome is unknown"} {
		if !strings.Contains(out, want) {
			t.Errorf("card lacks %q:\n%s", want, out)
		}
	}
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
	for _, r := range term.String() {
		if visible.Hidden(r) && r != '\n' {
			t.Fatalf("raw %U in an update: %q", r, term.String())
		}
	}
}

func TestArgsPrintsWholeArguments(t *testing.T) {
	hostile := hostileCard()
	b := &fakeBot{card: &hostile}
	out := runShell(t, b, "/args 2\n/args 7\n")
	want := strings.ReplaceAll(strings.ReplaceAll(hostile.Calls[1].Args, "\x1b", `\u001b`), "\u202e", `\u202e`)
	if !strings.Contains(out, "Arguments of call [2] restart_service:\n"+want+"\n") {
		t.Fatalf("/args 2 printed:\n%s", out)
	}
	if !strings.Contains(out, `"7" is not a call number of the card (1-3)`) || len(b.clicks) != 0 {
		t.Fatalf("output:\n%s", out)
	}
}

// fakeBot records what the shell asked of it.
type fakeBot struct {
	mu     sync.Mutex
	card   *card.Card
	turns  []string
	clicks []bot.Click
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

func (f *fakeBot) PendingCard(context.Context, bot.Thread) (*card.Card, error) {
	if f.card == nil {
		return nil, confirm.ErrNotFound
	}
	c := *f.card
	return &c, nil
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
	b := &fakeBot{card: &card}
	out := runShell(t, b, "hello there\n/allow 2\n/deny 2 not now please\n/deny all off hours\n/allow 1\n/allow 9\n/allow x\n/frob\n/help\n/quit\nnever read\n")
	if len(b.turns) != 1 || b.turns[0] != "hello there" {
		t.Fatalf("turns: %v", b.turns)
	}
	want := []bot.Click{
		{Platform: Platform, Channel: DefaultChannel, User: DefaultUser, Ref: "abcdefghijklmnop.1", Allow: true},
		{Platform: Platform, Channel: DefaultChannel, User: DefaultUser, Ref: "abcdefghijklmnop.1", Reason: "not now please"},
		{Platform: Platform, Channel: DefaultChannel, User: DefaultUser, Ref: "abcdefghijklmnop.1", Reason: "off hours"},
	}
	if len(b.clicks) != len(want) {
		t.Fatalf("clicks: %+v", b.clicks)
	}
	for i := range want {
		if !reflect.DeepEqual(b.clicks[i], want[i]) {
			t.Fatalf("click %d: %+v, want %+v", i, b.clicks[i], want[i])
		}
	}
	for _, s := range []string{
		"A card is still waiting from before",
		"Call 1 is not waiting for a decision",
		`"9" is not a call number of the card (1-2)`,
		`"x" is not a call number`,
		"Unknown command /frob",
		"/deny N [reason]    deny call N",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}
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
