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

	"github.com/airlockhq/airlock/adapters/slack/slacktest"
	cardpkg "github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/internal/testkit"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

var (
	t0      = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	decided = t0.Add(90 * time.Second)
)

func baseCard() cardpkg.Card {
	return cardpkg.Card{
		BatchID:     "k3q9x2abcdefghijklmnopqrst",
		Intro:       "I'll check the api first, then deploy it to <production> & tell <!channel>.",
		RequestedBy: "UBOB",
		Approvers:   confirm.Approvers{Users: []string{"UALICE"}, Groups: []string{"SOPS"}},
		CreatedAt:   t0,
		ExpiresAt:   t0.Add(30 * time.Minute),
		Status:      confirm.BatchPending,
		Calls: []cardpkg.Call{
			{
				Ref: "k3q9x2abcdefghijklmnopqrst.0", Number: 1, Key: "call_status", Tool: "service_status",
				Summary: "Read the status of api", Args: "{\n  \"service\": \"api\"\n}",
				Flagged: false, Approvals: 1, State: cardpkg.State{Kind: cardpkg.AllowedByPolicy, At: &t0},
				Run: confirm.RunNotStarted,
			},
			{
				Ref: "k3q9x2abcdefghijklmnopqrst.1", Number: 2, Key: "call_deploy", Tool: "deploy",
				Summary: "Deploy api to production", Args: "{\n  \"environment\": \"production\",\n  \"service\": \"api\"\n}",
				Flagged: true, Approvals: 1, Reasons: []confirm.Reason{{Kind: confirm.ReasonToolFlag}},
				State: cardpkg.State{Kind: cardpkg.Waiting}, Run: confirm.RunNotStarted,
			},
		},
	}
}

func pendingCard() cardpkg.Card { return baseCard() }

// riskCard: a critical and a high call waiting: each tier said in words,
// an emoji beside them.
func riskCard() cardpkg.Card {
	c := baseCard()
	for i := range c.Calls {
		if c.Calls[i].Flagged {
			c.Calls[i].Risk = confirm.RiskCritical
		}
	}
	c.Calls = append(c.Calls, cardpkg.Call{
		Ref: "k3q9x2abcdefghijklmnopqrst.2", Number: 3, Key: "call_migrate", Tool: "migrate_db",
		Summary: "Run migration 42 on production", Args: "{\n  \"version\": 42\n}",
		Flagged: true, Approvals: 1, Reasons: []confirm.Reason{{Kind: confirm.ReasonRule, Rule: "prod-db"}}, Risk: confirm.RiskHigh,
		State: cardpkg.State{Kind: cardpkg.Waiting}, Run: confirm.RunNotStarted,
	})
	return c
}

// allowAllCard: two calls waiting, so the card offers Allow all and Deny
// all (no style), carrying the card's reference only.
func allowAllCard() cardpkg.Card {
	c := riskCard()
	c.AllRef = "all-k3q9x2abcdefghijklmnopqrst.0"
	return c
}

func partialCard() cardpkg.Card {
	c := baseCard()
	c.Calls = append(c.Calls, cardpkg.Call{
		Ref: "k3q9x2abcdefghijklmnopqrst.2", Number: 3, Key: "call_notify", Tool: "notify",
		Summary: "Tell #ops that api is deploying", Args: "{\n  \"channel\": \"ops\"\n}",
		Flagged: true, Approvals: 1, Reasons: []confirm.Reason{{Kind: confirm.ReasonConfirmationTools}},
		Votes: []confirm.Vote{{By: "UALICE", At: decided}},
		State: cardpkg.State{Kind: cardpkg.Allowed, By: "UALICE", At: &decided}, Run: confirm.RunNotStarted,
	})
	return c
}

func completeCard() cardpkg.Card {
	c := baseCard()
	c.Status = confirm.BatchDone
	c.Calls[0].Run, c.Calls[0].Result = confirm.RunSucceeded, "api: healthy"
	c.Calls[1].State = cardpkg.State{Kind: cardpkg.Allowed, By: "UALICE", At: &decided}
	c.Calls[1].Votes = []confirm.Vote{{By: "UALICE", At: decided}}
	c.Calls[1].Run, c.Calls[1].Result = confirm.RunFailed, "exit status 1: rollout timed out <after 5m>"
	c.Calls = append(c.Calls,
		cardpkg.Call{
			Ref: "k3q9x2abcdefghijklmnopqrst.2", Number: 3, Key: "call_drop", Tool: "drop_table",
			Summary: "Drop table users", Args: "{\n  \"table\": \"users\"\n}",
			Flagged: true, Approvals: 1, Reasons: []confirm.Reason{{Kind: confirm.ReasonToolFlag}},
			State: cardpkg.State{Kind: cardpkg.Denied, By: "UALICE", At: &decided, Reason: "not during the freeze"},
			Run:   confirm.RunNotStarted,
		},
		cardpkg.Call{
			Ref: "k3q9x2abcdefghijklmnopqrst.3", Number: 4, Key: "call_page", Tool: "page_oncall",
			Summary: "Page the on-call", Args: "{}",
			Flagged: true, Approvals: 1, Reasons: []confirm.Reason{{Kind: confirm.ReasonToolFlag}},
			State: cardpkg.State{Kind: cardpkg.Withdrawn, By: "UBOB", At: &decided}, Run: confirm.RunNotStarted,
		},
		cardpkg.Call{
			Ref: "k3q9x2abcdefghijklmnopqrst.4", Number: 5, Key: "call_restart", Tool: "restart",
			Summary: "Restart api", Args: "{}",
			Flagged: true, Approvals: 1, Grantable: true, Reasons: []confirm.Reason{{Kind: confirm.ReasonToolFlag}},
			State: cardpkg.State{Kind: cardpkg.AllowedByGrant, At: &t0, GrantID: "g7hq2k"}, Run: confirm.RunSucceeded, Result: "restarted",
		},
		cardpkg.Call{
			Ref: "k3q9x2abcdefghijklmnopqrst.5", Number: 6, Key: "call_wipe", Tool: "wipe",
			Summary: "Wipe the cache", Args: "{}",
			Reasons: []confirm.Reason{{Kind: confirm.ReasonRule, Rule: "no-wipes"}},
			State:   cardpkg.State{Kind: cardpkg.DeniedByRule, At: &t0, Rule: "no-wipes", Message: confirm.DefaultRuleDenyMessage("no-wipes")},
			Run:     confirm.RunNotStarted,
		},
	)
	return c
}

// quorumCard: a call needing two approvals, one given, and a call a rule
// restricted to a group.
func quorumCard() cardpkg.Card {
	c := baseCard()
	c.GrantFor = time.Hour
	c.Calls[1].Approvals = 2
	c.Calls[1].Reasons = []confirm.Reason{{Kind: confirm.ReasonToolFlag}, {Kind: confirm.ReasonRule, Rule: "prod-deploys"}}
	c.Calls[1].Votes = []confirm.Vote{{By: "UALICE", At: decided}}
	c.Calls[1].Restrict = []confirm.Approvers{{Groups: []string{"SOPS"}}, {Users: []string{"UALICE", "UCAROL"}}}
	return c
}

// grantCard: grants are on and the waiting call may be granted.
func grantCard() cardpkg.Card {
	c := baseCard()
	c.GrantFor = time.Hour
	c.Calls[1].Grantable = true
	return c
}

func longArgsCard() cardpkg.Card {
	c := baseCard()
	var lines []string
	for i := 0; i < 60; i++ {
		lines = append(lines, `    "host-`+strings.Repeat("x", 20)+`-`+string(rune('a'+i%26))+`": "<ok> & fine"`)
	}
	c.Calls[1].Args = "{\n  \"hosts\": {\n" + strings.Join(lines, ",\n") + "\n  }\n}"
	return c
}

// grantedBy says whose grant g7hq2k is, as the adapter learns it.
var grantedBy = map[string]string{"g7hq2k": "UALICE"}

func grantNotice() cardpkg.GrantNotice {
	return cardpkg.GrantNotice{Ref: confirm.GrantRef("g7hq2k"), GrantID: "g7hq2k", Tool: "deploy", By: "UALICE", For: "UBOB", Until: t0.Add(time.Hour)}
}

func revokedNotice() cardpkg.GrantNotice {
	n := grantNotice()
	n.RevokedBy, n.RevokedAt = "UCAROL", &decided
	return n
}

func TestRenderGolden(t *testing.T) {
	cases := map[string]any{
		"card_pending":         pendingCard(),
		"card_partial":         partialCard(),
		"card_risk":            riskCard(),
		"card_allow_all":       allowAllCard(),
		"card_complete":        completeCard(),
		"card_long_args":       longArgsCard(),
		"card_hostile":         hostileCard(),
		"card_runbook_step":    stepCard(),
		"run_running":          sampleRun(confirm.RunbookRunning),
		"run_halted":           sampleRun(confirm.RunbookHalted),
		"run_stopped":          sampleRun(confirm.RunbookStopped),
		"card_quorum":          quorumCard(),
		"card_grant":           grantCard(),
		"grant_notice_active":  grantNotice(),
		"grant_notice_revoked": revokedNotice(),
		"card_editable":        editableCard(),
		"card_edited":          editedCard(),
		"card_extended":        extendedCard(),
		"card_escalations":     escalationsCard(),
		"card_dm_copy":         dmCopyCard(),
		"card_approvals_copy":  approvalsCopyCard(),
		"pointer_waiting":      waitingPointer(),
		"pointer_complete":     completePointer(),
		"card_unknown":         unknownCard(false),
		"card_unknown_checked": unknownCard(true),
		"unknown_notice":       unknownNotice(false),
		"unknown_notice_check": unknownNotice(true),
	}
	for name, card := range coverGoldens {
		cases[name] = card()
	}
	for name, v := range cases {
		t.Run(name, func(t *testing.T) {
			var msg map[string]any
			switch v := v.(type) {
			case cardpkg.Card:
				msg = map[string]any{"text": FallbackText(v), "blocks": RenderWith(v, grantedBy)}
				if ms := RenderMessages(v, grantedBy); len(ms) > 1 {
					msg = map[string]any{"messages": ms}
				}
			case cardpkg.GrantNotice:
				msg = map[string]any{"text": GrantNoticeText(v), "blocks": RenderGrantNotice(v, t0)}
			case cardpkg.Pointer:
				msg = map[string]any{"text": PointerText(v), "blocks": RenderPointer(v)}
			case cardpkg.UnknownNotice:
				msg = map[string]any{"text": UnknownNoticeText(v), "blocks": RenderUnknownNotice(v)}
			case cardpkg.Run:
				blocks, fallback := RenderRun(v)
				msg = map[string]any{"text": fallback, "blocks": blocks}
			}
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false) // keep <@U…> readable in the golden files
			enc.SetIndent("", "  ")
			if err := enc.Encode(msg); err != nil {
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
	for name, card := range map[string]cardpkg.Card{"pending": pendingCard(), "partial": partialCard(), "long": longArgsCard(), "complete": completeCard(),
		"quorum": quorumCard(), "grant": grantCard(), "hostile": hostileCard(), "editable": editableCard(), "edited": editedCard(),
		"extended": extendedCard(), "escalations": escalationsCard(), "dm copy": dmCopyCard(), "approvals copy": approvalsCopyCard()} {
		blocks := RenderWith(card, grantedBy)
		if len(blocks) > maxMessageBlock {
			t.Errorf("%s: %d blocks", name, len(blocks))
		}
		for _, b := range blocks {
			if s, ok := b.(*slack.SectionBlock); ok && utf8.RuneCountInString(s.Text.Text) > maxSectionText {
				t.Errorf("%s: section %s has %d characters", name, s.BlockID, utf8.RuneCountInString(s.Text.Text))
			}
		}
		var primary, danger, grant int
		for _, btn := range buttons(blocks) {
			if len(btn.Value) > 2000 || len(btn.ActionID) > 255 {
				t.Errorf("%s: button %s beyond Slack's limits", name, btn.ActionID)
			}
			if _, _, err := confirm.ParseRef(btn.Value); err != nil {
				t.Errorf("%s: button %s value %q is not an opaque reference", name, btn.ActionID, btn.Value)
			}
			if btn.ActionID == ActionAllowGrant {
				grant++
				if btn.Text.Text != "Allow for 1h" {
					t.Errorf("%s: grant button says %q", name, btn.Text.Text)
				}
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
		open, grantable := 0, 0
		for _, c := range card.Calls {
			if c.Open() {
				open++
			}
			if c.Open() && c.Grantable && card.GrantFor > 0 {
				grantable++
			}
		}
		if primary != open || danger != open {
			t.Errorf("%s: %d open calls but %d Allow and %d Deny buttons", name, open, primary, danger)
		}
		if grant != grantable {
			t.Errorf("%s: %d grantable open calls but %d Allow for buttons", name, grantable, grant)
		}
		if card.Complete() && len(buttons(blocks)) != 0 {
			t.Errorf("%s: a complete card has buttons", name)
		}
		shown, live := readBlocks(t, mustJSON(blocks))
		if bad := liveProblems(live, shown); len(bad) != 0 {
			t.Errorf("%s: live beyond Airlock's own entities: %v\n%s", name, bad, live)
		}
		if name != "hostile" && !strings.Contains(shown, "deploy it to <production> & tell <!channel>.") {
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
		card.Calls = append(card.Calls, cardpkg.Call{Ref: confirm.Ref("abc", i), Number: i + 1, Tool: "deploy", Args: "{}", Flagged: true, Approvals: 2,
			Grantable: true, State: cardpkg.State{Kind: cardpkg.Waiting}})
	}
	msgs := RenderMessages(card, nil)
	if len(msgs) != 5 {
		t.Fatalf("%d messages for 40 calls, want 5", len(msgs))
	}
	for i, m := range msgs {
		if len(m.Blocks) > maxMessageBlock {
			t.Fatalf("message %d: %d blocks", i+1, len(m.Blocks))
		}
		if js, _ := json.Marshal(m.Blocks); strings.Contains(string(js), "not shown") {
			t.Errorf("message %d leaves calls out", i+1)
		}
	}
	if n := len(allowsIn(msgs)); n != 40 {
		t.Errorf("%d calls with Allow, want 40", n)
	}
	// A card posted in one message (by an earlier release) stays in it.
	blocks := RenderMessagesIn(card, nil, 1)[0].Blocks
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

// hostileCard: every text from the model, a tool, a rule or a person is
// an attack: bidi override, zero-width space, broadcasts and mentions, a
// link, a spoiler, an emoji shortcode, mrkdwn, a backtick run, and
// arguments far longer than a card shows; people and grants named by
// things that are no Slack ids.
func hostileCard() cardpkg.Card {
	evil := "Restart api\u202egnp.exe\u200b <!channel> <!here> <!subteam^SOPS> @everyone <@UMALLORY> <@123456789012345678> [x](http://evil) <http://evil|click> ||x|| :skull: *b* _i_ ~s~ ```"
	c := baseCard()
	c.GrantFor = time.Hour
	c.Intro = "Trust me <!channel>\n> quoted :skull: \u2066isolate\u2069"
	c.Calls[1].Summary = evil
	c.Calls[1].Args = "{\n  \"note\": \"" + evil + " " + strings.Repeat("A", 3000) + "\",\n  \"service\": \"api\u202e\"\n}"
	c.Calls[1].Reasons = []confirm.Reason{{Kind: confirm.ReasonUnknownOutcome}, {Kind: confirm.ReasonRule, Rule: "<!channel> *r* \u202e"}}
	c.Calls[1].Approvals = 2
	c.Calls[1].Votes = []confirm.Vote{{By: "<!here>", At: decided}, {By: "UALICE", At: decided}}
	c.Calls[1].Restrict = []confirm.Approvers{{Users: []string{"<@UMALLORY>"}, Groups: []string{"<!subteam^SOPS>", "SOPS"}, Roles: []string{"<!everyone>"}}}
	c.Calls = append(c.Calls, cardpkg.Call{
		Ref: "k3q9x2abcdefghijklmnopqrst.2", Number: 3, Key: "call_x", Tool: "evil`tool <!channel>",
		Summary: "x", Args: "{}", Flagged: true, Approvals: 1,
		State: cardpkg.State{Kind: cardpkg.Denied, By: "UALICE", At: &decided, Reason: "<!channel> *no* :skull: \u202e"},
	}, cardpkg.Call{
		Ref: "k3q9x2abcdefghijklmnopqrst.3", Number: 4, Key: "call_y", Tool: "service_status",
		Summary: "y", Args: "{}", State: cardpkg.State{Kind: cardpkg.AllowedByPolicy, At: &t0},
		Run: confirm.RunFailed, Result: "HTTP 500 <!everyone> <https://evil|x> \x1b[2J",
	}, cardpkg.Call{
		Ref: "k3q9x2abcdefghijklmnopqrst.4", Number: 5, Key: "call_z", Tool: "wipe",
		Summary: "z", Args: "{}", State: cardpkg.State{Kind: cardpkg.DeniedByRule, At: &t0, Rule: "<!here> `r`\u200b", Message: "<!channel>"},
	}, cardpkg.Call{
		Ref: "k3q9x2abcdefghijklmnopqrst.5", Number: 6, Key: "call_g", Tool: "deploy",
		Summary: "g", Args: "{}", Flagged: true, Approvals: 1, State: cardpkg.State{Kind: cardpkg.AllowedByGrant, At: &t0, GrantID: "<!here>\u200b"},
	}, cardpkg.Call{
		Ref: "k3q9x2abcdefghijklmnopqrst.6", Number: 7, Key: "call_h", Tool: "deploy",
		Summary: "h", Args: "{}", Flagged: true, Approvals: 1, State: cardpkg.State{Kind: cardpkg.AllowedByGrant, At: &t0, GrantID: "g7hq2k"},
	}, cardpkg.Call{
		Ref: "k3q9x2abcdefghijklmnopqrst.7", Number: 8, Key: "call_n", Tool: "deploy",
		Summary: "n", Args: "{}", Flagged: true, Approvals: 1, State: cardpkg.State{Kind: cardpkg.NotRun, Message: "<!everyone> \u2066"},
	}, cardpkg.Call{
		Ref: "k3q9x2abcdefghijklmnopqrst.8", Number: 9, Key: "call_w", Tool: "deploy",
		Summary: "w", Args: "{}", Flagged: true, Approvals: 1, State: cardpkg.State{Kind: cardpkg.Withdrawn, By: "<!channel>", Reason: "<@UALICE>"},
	})
	return c
}

// hostileGrants: who granted, as a store might hold it: not a Slack id.
var hostileGrants = map[string]string{"g7hq2k": "<!channel> \u202e"}

func TestHostileCardIsInert(t *testing.T) {
	card := hostileCard()
	var blocks []slack.Block
	for _, m := range RenderMessages(card, hostileGrants) {
		blocks = append(blocks, m.Blocks...)
	}
	raw := mustJSON(blocks)
	shown, live := readBlocks(t, raw)
	if bad := liveProblems(live+FallbackText(card), shown+FallbackText(card)); len(bad) != 0 {
		t.Fatalf("live or hidden: %v\nlive:\n%s", bad, live)
	}
	if strings.Contains(live, "<@UMALLORY>") { // named only by the model and in a malformed restriction
		t.Errorf("someone the model named is mentioned:\n%s", live)
	}
	testkit.ContainsAll(t, "the card", shown,
		"Restart api\\u202egnp.exe\\u200b <!channel> <!here> <!subteam^SOPS> @everyone <@UMALLORY>", // the read-back as written
		"\"note\": \"Restart api\\u202egnp.exe\\u200b <!channel>",                                   // the arguments, hidden characters escaped
		"more characters hidden; Show full arguments shows them all.",
		"needs 2 approvals: an earlier call of this tool has an unknown outcome: check whether it took effect; rule <!channel> *r* \\u202e",
		"Who may decide: <@UMALLORY>, group <!subteam^SOPS>, <!subteam^SOPS>, role <!everyone>",
		"Waiting for a decision: 2 of 2 approvals: <!here>, <@UALICE>",
		"Reason: <!channel> *no* :skull: \\u202e",
		"failed: HTTP 500 <!everyone> <https://evil|x> \\u001b[2J",
		"Refused by rule <!here> `r`\\u200b; not run",
		"Allowed by grant <!here>\\u200b",
		"Allowed by <!channel> \\u202e's grant",
		"Not run: <!everyone> \\u2066",
		"Withdrawn by the requester <!channel>; not run\nReason: <@UALICE>",
	)
	if strings.Contains(FallbackText(card), "evil") || strings.Contains(FallbackText(card), "<") {
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

// A grant notice names people and the tool inertly; Revoke (no style,
// the grant's reference) only while the grant is active.
func TestGrantNotice(t *testing.T) {
	evil := cardpkg.GrantNotice{Ref: confirm.GrantRef("g7hq2k"), GrantID: "g7hq2k", Tool: "de<!channel>ploy\u202e", By: "<!here>", For: "<!everyone>", Until: t0.Add(time.Hour)}
	for name, tc := range map[string]struct {
		n      cardpkg.GrantNotice
		now    time.Time
		revoke bool
		says   string
	}{
		"active":  {grantNotice(), t0, true, "<@UALICE> granted calls of deploy in this thread without a card until 2026-11-29 13:00 UTC, for requests by <@UBOB> or an approver of this channel."},
		"revoked": {revokedNotice(), t0, false, "Revoked by <@UCAROL> 2026-11-29 12:01:30 UTC. Later calls need a card again."},
		"expired": {grantNotice(), t0.Add(2 * time.Hour), false, "Expired. Later calls need a card again."},
		"hostile": {evil, t0, true, "<!here> granted calls of de<!channel>ploy\\u202e in this thread"},
	} {
		blocks := RenderGrantNotice(tc.n, tc.now)
		shown, live := readBlocks(t, mustJSON(blocks))
		text := GrantNoticeText(tc.n)
		if bad := liveProblems(live+text, shown+text); len(bad) != 0 {
			t.Errorf("%s: live or hidden: %v\n%s\n%s", name, bad, live, text)
		}
		if strings.ContainsAny(text, "<>") || (name == "hostile" && strings.Contains(live, "<@")) {
			t.Errorf("%s: the notice's text pings: %q / %q", name, text, live)
		}
		if !strings.Contains(shown, tc.says) {
			t.Errorf("%s: the notice does not say %q:\n%s", name, tc.says, shown)
		}
		bs := buttons(blocks)
		if !tc.revoke {
			if len(bs) != 0 {
				t.Errorf("%s: buttons on an inactive grant: %+v", name, bs)
			}
			continue
		}
		if len(bs) != 1 || bs[0].ActionID != ActionRevokeGrant || bs[0].Value != tc.n.Ref || bs[0].Style != "" {
			t.Errorf("%s: buttons %+v, want one Revoke", name, bs)
		}
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

// stepCard is a runbook step's card: Airlock's call, started by a person,
// with no words of the agent.
func stepCard() cardpkg.Card {
	c := baseCard()
	c.Intro = ""
	c.Calls = c.Calls[1:]
	c.Calls[0].Number, c.Calls[0].Key = 1, "run1/restart/2"
	c.Step = &cardpkg.Step{Runbook: "restart", ID: "deploy_api", StartedBy: "UBOB", Attempt: 2, Attempts: 5}
	return c
}

// sampleRun is a run message in a status, its parameters hostile.
func sampleRun(st confirm.RunbookStatus) cardpkg.Run {
	r := cardpkg.Run{ID: "r7k2mq9xabcdefghijklmnopqr", Runbook: "restart", RequestedBy: "UBOB", Status: st,
		Params: `{"reason":"<!channel> disk full *now*","service":"api"}`,
		Steps: []cardpkg.RunStep{
			{ID: "before", Tool: "service_status", State: "succeeded (15ms)"},
			{ID: "restart", Tool: "restart_service", State: "needs approval, or running once allowed"},
			{ID: "after", Tool: "service_status", State: "waiting"},
		}}
	switch st {
	case confirm.RunbookHalted:
		r.Steps[1].State, r.HaltedAt = "unknown", "restart"
	case confirm.RunbookStopped:
		r.Steps[1].State = "denied"
	}
	return r
}

// mrkdwnTexts are the texts of the blocks that Slack formats (mrkdwn),
// where "<!channel>" would ping and "<url|x>" would link; every other
// text is plain or literal rich text.
func mrkdwnTexts(t *testing.T, blocks []slack.Block) []string {
	t.Helper()
	raw, err := json.Marshal(blocks)
	if err != nil {
		t.Fatal(err)
	}
	_, md, err := slacktest.Formatted(raw)
	if err != nil {
		t.Fatal(err)
	}
	return md
}

// A server's question is inert: its message and its fields' names and
// titles are literal rich text, never formatted, so they cannot ping,
// link or hide; the fallback names only the server and the tool.
func TestQuestionIsInert(t *testing.T) {
	hostile := "<!channel> <@U0ALICE> <https://evil.example|click> *bold*"
	n := cardpkg.QuestionNotice{Ref: confirm.QuestionRef("q1"), Server: "deployer", Tool: "deployer__ship", Message: hostile,
		Fields: []confirm.QuestionField{{Name: "env", Title: hostile, Type: "string", Choices: []string{"<!here>", "b"}}},
		Status: confirm.QuestionPending, Expires: time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)}
	blocks := RenderQuestion(n)
	for _, s := range mrkdwnTexts(t, blocks) {
		if strings.Contains(s, "<!") || strings.Contains(s, "<@") || strings.Contains(s, "<http") {
			t.Fatalf("formatted text holds the server's words: %q", s)
		}
	}
	raw, _ := json.Marshal(blocks)
	all, _, _ := slacktest.Formatted(raw)
	if !strings.Contains(all, "<!channel> <@U0ALICE>") || !strings.Contains(string(raw), ActionAnswer) {
		t.Fatalf("the message is not shown literally: %s", raw)
	}
	if fb := QuestionText(n); strings.Contains(fb, "<!") || strings.Contains(fb, "<@") {
		t.Fatalf("fallback %q", fb)
	}
	m := AnswerModal(ModalMeta{Ref: n.Ref, Channel: "C1"}, n)
	for _, s := range mrkdwnTexts(t, m.Blocks.BlockSet) {
		if strings.Contains(s, "<!") || strings.Contains(s, "<@") || strings.Contains(s, "<http") {
			t.Fatalf("the form formats the server's words: %q", s)
		}
	}
}

// With the web console, a card's footer links to the request's page.
func TestCardLinksToItsPage(t *testing.T) {
	c := cardpkg.Card{BatchID: "b1", RequestedBy: "U0BOB", PageURL: "https://airlock.example.com/ui/approvals/b1"}
	if got := footer(c); !strings.Contains(got, "<https://airlock.example.com/ui/approvals/b1|Open in the web console>") {
		t.Fatalf("footer %q", got)
	}
	c.PageURL = "javascript:alert(1)"
	if got := footer(c); strings.Contains(got, "javascript") {
		t.Fatalf("footer %q", got)
	}
}
