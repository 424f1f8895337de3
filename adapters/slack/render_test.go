package slack

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/slack-go/slack"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/confirm"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

var (
	t0      = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	decided = t0.Add(90 * time.Second)
)

func baseCard() bot.Card {
	return bot.Card{
		BatchID:     "k3q9x2abcdefghijklmnopqrst",
		Intro:       "I'll check the api first, then deploy it to <production> & tell <!channel>.",
		RequestedBy: "UBOB",
		Approvers:   bot.ApproverSet{Users: []string{"UALICE"}, Groups: []string{"SOPS"}},
		CreatedAt:   t0,
		ExpiresAt:   t0.Add(30 * time.Minute),
		Status:      confirm.BatchPending,
		Calls: []bot.CardCall{
			{
				Ref: "k3q9x2abcdefghijklmnopqrst.0", Number: 1, Key: "call_status", Tool: "service_status",
				Summary: "Read the status of api", Args: "{\n  \"service\": \"api\"\n}",
				Flagged: false, Decision: confirm.DecisionAllowedByPolicy, DecidedBy: bot.PolicyActor, DecidedAt: &t0,
				Run: confirm.RunNotStarted,
			},
			{
				Ref: "k3q9x2abcdefghijklmnopqrst.1", Number: 2, Key: "call_deploy", Tool: "deploy",
				Summary: "Deploy api to production", Args: "{\n  \"environment\": \"production\",\n  \"service\": \"api\"\n}",
				Flagged: true, Decision: confirm.DecisionPending, Run: confirm.RunNotStarted,
			},
		},
	}
}

func pendingCard() bot.Card { return baseCard() }

func partialCard() bot.Card {
	c := baseCard()
	c.Calls = append(c.Calls, bot.CardCall{
		Ref: "k3q9x2abcdefghijklmnopqrst.2", Number: 3, Key: "call_notify", Tool: "notify",
		Summary: "Tell #ops that api is deploying", Args: "{\n  \"channel\": \"ops\"\n}",
		Flagged: true, Decision: confirm.DecisionAllowed, DecidedBy: "UALICE", DecidedAt: &decided, Run: confirm.RunNotStarted,
	})
	return c
}

func completeCard() bot.Card {
	c := baseCard()
	c.Status = confirm.BatchDone
	c.Calls[0].Run, c.Calls[0].Result = confirm.RunSucceeded, "api: healthy"
	c.Calls[1].Decision, c.Calls[1].DecidedBy, c.Calls[1].DecidedAt = confirm.DecisionAllowed, "UALICE", &decided
	c.Calls[1].Run, c.Calls[1].Result = confirm.RunFailed, "exit status 1: rollout timed out <after 5m>"
	c.Calls = append(c.Calls,
		bot.CardCall{
			Ref: "k3q9x2abcdefghijklmnopqrst.2", Number: 3, Key: "call_drop", Tool: "drop_table",
			Summary: "Drop table users", Args: "{\n  \"table\": \"users\"\n}",
			Flagged: true, Decision: confirm.DecisionDenied, DecidedBy: "UALICE", DecidedAt: &decided,
			DenyMessage: confirm.DefaultDenyMessage + ` Reason given by the approver (UALICE): "not during the freeze"`,
			Run:         confirm.RunNotStarted,
		},
		bot.CardCall{
			Ref: "k3q9x2abcdefghijklmnopqrst.3", Number: 4, Key: "call_page", Tool: "page_oncall",
			Summary: "Page the on-call", Args: "{}",
			Flagged: true, Decision: confirm.DecisionDenied, DecidedBy: "UBOB", DecidedAt: &decided,
			DenyMessage: confirm.DefaultDenyMessage, Run: confirm.RunNotStarted,
		},
	)
	return c
}

func longArgsCard() bot.Card {
	c := baseCard()
	var lines []string
	for i := 0; i < 60; i++ {
		lines = append(lines, `    "host-`+strings.Repeat("x", 20)+`-`+string(rune('a'+i%26))+`": "<ok> & fine"`)
	}
	c.Calls[1].Args = "{\n  \"hosts\": {\n" + strings.Join(lines, ",\n") + "\n  }\n}"
	return c
}

func TestRenderGolden(t *testing.T) {
	cases := map[string]bot.Card{
		"card_pending":   pendingCard(),
		"card_partial":   partialCard(),
		"card_complete":  completeCard(),
		"card_long_args": longArgsCard(),
		"card_hostile":   hostileCard(),
	}
	for name, card := range cases {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false) // keep <@U…> readable in the golden files
			enc.SetIndent("", "  ")
			if err := enc.Encode(map[string]any{"text": FallbackText(card), "blocks": Render(card)}); err != nil {
				t.Fatal(err)
			}
			got := buf.Bytes()
			path := filepath.Join("testdata", name+".json")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from the golden file; run go test ./adapters/slack -run TestRenderGolden -update and review the diff\ngot:\n%s", path, got)
			}
		})
	}
}

// buttons lists the buttons of rendered blocks, section accessories
// included.
func buttons(blocks []slack.Block) []*slack.ButtonBlockElement {
	var out []*slack.ButtonBlockElement
	for _, b := range blocks {
		switch b := b.(type) {
		case *slack.ActionBlock:
			for _, e := range b.Elements.ElementSet {
				if btn, ok := e.(*slack.ButtonBlockElement); ok {
					out = append(out, btn)
				}
			}
		case *slack.SectionBlock:
			if b.Accessory != nil && b.Accessory.ButtonElement != nil {
				out = append(out, b.Accessory.ButtonElement)
			}
		}
	}
	return out
}

func TestRenderRules(t *testing.T) {
	for name, card := range map[string]bot.Card{"pending": pendingCard(), "partial": partialCard(), "long": longArgsCard(), "complete": completeCard()} {
		blocks := Render(card)
		if len(blocks) > maxMessageBlock {
			t.Errorf("%s: %d blocks", name, len(blocks))
		}
		for _, b := range blocks {
			if s, ok := b.(*slack.SectionBlock); ok && utf8.RuneCountInString(s.Text.Text) > maxSectionText {
				t.Errorf("%s: section %s has %d characters", name, s.BlockID, utf8.RuneCountInString(s.Text.Text))
			}
		}
		var primary, danger int
		for _, btn := range buttons(blocks) {
			if len(btn.Value) > 2000 || len(btn.ActionID) > 255 {
				t.Errorf("%s: button %s beyond Slack's limits", name, btn.ActionID)
			}
			if _, _, err := confirm.ParseRef(btn.Value); err != nil {
				t.Errorf("%s: button %s value %q is not an opaque reference", name, btn.ActionID, btn.Value)
			}
			switch btn.Style {
			case slack.StylePrimary:
				primary++
				if btn.ActionID != ActionAllow {
					t.Errorf("%s: primary style on %s", name, btn.ActionID)
				}
			case slack.StyleDanger:
				danger++
				if btn.ActionID != ActionDeny {
					t.Errorf("%s: danger style on %s", name, btn.ActionID)
				}
			}
		}
		open := 0
		for _, c := range card.Calls {
			if c.Open() {
				open++
			}
		}
		if primary != open || danger != open {
			t.Errorf("%s: %d open calls but %d Allow and %d Deny buttons", name, open, primary, danger)
		}
		if card.Complete() && len(buttons(blocks)) != 0 {
			t.Errorf("%s: a complete card has buttons", name)
		}
		shown, live := readBlocks(t, mustJSON(blocks))
		if bad := liveProblems(live, shown); len(bad) != 0 {
			t.Errorf("%s: live beyond Airlock's own entities: %v\n%s", name, bad, live)
		}
		if !strings.Contains(shown, "deploy it to <production> & tell <!channel>.") {
			t.Errorf("%s: the agent's words do not show as written:\n%s", name, shown)
		}
	}
	long := Render(longArgsCard())
	var show int
	for _, btn := range buttons(long) {
		if btn.ActionID == ActionShowArgs {
			show++
			if btn.Style != "" {
				t.Errorf("show-arguments button has style %q", btn.Style)
			}
		}
	}
	if show != 1 {
		t.Errorf("long arguments: %d show-arguments buttons, want 1", show)
	}
}

func TestRenderManyCallsStaysWithinBlockLimit(t *testing.T) {
	card := baseCard()
	card.Calls = nil
	for i := 0; i < 40; i++ {
		card.Calls = append(card.Calls, bot.CardCall{Ref: confirm.Ref("abc", i), Number: i + 1, Tool: "deploy", Args: "{}", Flagged: true, Decision: confirm.DecisionPending})
	}
	blocks := Render(card)
	if len(blocks) > maxMessageBlock {
		t.Fatalf("%d blocks", len(blocks))
	}
	js, _ := json.Marshal(blocks)
	if !strings.Contains(string(js), "more calls not shown") {
		t.Error("no note about the calls not shown")
	}
}

func TestArgsModalHoldsEverything(t *testing.T) {
	card := longArgsCard()
	card.Calls[1].Args += " \u202e ```"
	m := ArgsModal(card.Calls[1])
	var b strings.Builder
	for _, blk := range m.Blocks.BlockSet[1:] {
		pre := blk.(*slack.RichTextBlock).Elements[0].(*slack.RichTextPreformatted)
		s := pre.Elements[0].(*slack.RichTextSectionTextElement).Text
		if utf8.RuneCountInString(s) > maxModalArgs {
			t.Fatalf("modal block of %d characters", utf8.RuneCountInString(s))
		}
		b.WriteString(s)
	}
	if want := strings.ReplaceAll(card.Calls[1].Args, "\u202e", `\u202e`); b.String() != want {
		t.Errorf("modal arguments differ from the call's:\n%s\nwant\n%s", b.String(), want)
	}
	if len(m.Blocks.BlockSet) > maxModalBlocks {
		t.Errorf("%d blocks in a modal", len(m.Blocks.BlockSet))
	}
}

// hostileCard: every text from the model, a tool or a person is an
// attack: bidi override, zero-width space, broadcasts and mentions, a
// link, a spoiler, an emoji shortcode, mrkdwn, a backtick run, and
// arguments far longer than a card shows.
func hostileCard() bot.Card {
	evil := "Restart api\u202egnp.exe\u200b <!channel> <!here> <!subteam^SOPS> @everyone <@UMALLORY> <@123456789012345678> [x](http://evil) <http://evil|click> ||x|| :skull: *b* _i_ ~s~ ```"
	c := baseCard()
	c.Intro = "Trust me <!channel>\n> quoted :skull: \u2066isolate\u2069"
	c.Calls[1].Summary = evil
	c.Calls[1].Args = "{\n  \"note\": \"" + evil + " " + strings.Repeat("A", 3000) + "\",\n  \"service\": \"api\u202e\"\n}"
	c.Calls[1].FlagReason = "a call of this tool with these arguments had an unknown outcome <!channel>"
	c.Calls = append(c.Calls, bot.CardCall{
		Ref: "k3q9x2abcdefghijklmnopqrst.2", Number: 3, Key: "call_x", Tool: "evil`tool <!channel>",
		Summary: "x", Args: "{}", Flagged: true, Decision: confirm.DecisionDenied, DecidedBy: "UALICE", DecidedAt: &decided,
		DenyMessage: confirm.DefaultDenyMessage + ` Reason given by the approver (UALICE): "<!channel> *no* :skull: \u202e"`,
	}, bot.CardCall{
		Ref: "k3q9x2abcdefghijklmnopqrst.3", Number: 4, Key: "call_y", Tool: "service_status",
		Summary: "y", Args: "{}", Decision: confirm.DecisionAllowedByPolicy, DecidedBy: bot.PolicyActor, DecidedAt: &t0,
		Run: confirm.RunFailed, Result: "HTTP 500 <!everyone> <https://evil|x> \x1b[2J",
	})
	return c
}

func TestHostileCardIsInert(t *testing.T) {
	card := hostileCard()
	blocks := Render(card)
	raw := mustJSON(blocks)
	shown, live := readBlocks(t, raw)
	if bad := liveProblems(live+FallbackText(card), shown+FallbackText(card)); len(bad) != 0 {
		t.Fatalf("live or hidden: %v\nlive:\n%s", bad, live)
	}
	for _, want := range []string{
		"Restart api\\u202egnp.exe\\u200b <!channel> <!here> <!subteam^SOPS> @everyone <@UMALLORY>", // the read-back as written
		"\"note\": \"Restart api\\u202egnp.exe\\u200b <!channel>",                                   // the arguments, hidden characters escaped
		"more characters hidden. Show full arguments opens them whole.",
		"Why a person is asked: a call of this tool with these arguments had an unknown outcome <!channel>",
		"Reason: <!channel> *no* :skull: \\u202e",
		"failed: HTTP 500 <!everyone> <https://evil|x> \\u001b[2J",
	} {
		if !strings.Contains(shown, want) {
			t.Errorf("the card does not show %q:\n%s", want, shown)
		}
	}
	if strings.Contains(FallbackText(card), "evil") {
		t.Errorf("model text in the notification text: %q", FallbackText(card))
	}
	var show int
	for _, b := range buttons(blocks) {
		if b.ActionID == ActionShowArgs {
			show++
		}
	}
	if show != 1 {
		t.Errorf("%d show-arguments buttons, want 1", show)
	}
}

func TestEscapeClip(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"a<b>&c", 100, "a&lt;b&gt;&amp;c"},
		{"abcdef", 4, "abc…"},
		{"ab<cd", 5, "ab…"},
		{"<<<<", 9, "&lt;&lt;…"},
	} {
		if got := escapeClip(tc.in, tc.n); got != tc.want {
			t.Errorf("escapeClip(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
		if utf8.RuneCountInString(escapeClip(tc.in, tc.n)) > tc.n {
			t.Errorf("escapeClip(%q, %d) too long", tc.in, tc.n)
		}
	}
}

func TestDenyReason(t *testing.T) {
	for msg, want := range map[string]string{
		confirm.DefaultDenyMessage: "",
		confirm.DefaultDenyMessage + ` Reason given by the approver (UALICE): "not now \"please\""`: `not now "please"`,
		"The user moved on.": "The user moved on.",
	} {
		if got := denyReason(msg); got != want {
			t.Errorf("denyReason(%q) = %q, want %q", msg, got, want)
		}
	}
}
