package slack

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	cardpkg "github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/internal/testkit"
)

// Cards for the line of what a yes covers (golden files card_covers_*).

// coversOnceCard: one call waiting, self-approval on: Allow runs it once.
func coversOnceCard() cardpkg.Card {
	c := baseCard()
	c.Now, c.SelfApproval = t0.Add(5*time.Minute), true
	return c
}

// coversGrantCard: "Allow for 1h" offered: later calls of the tool by
// the requester or an approver, until an hour after the render time.
func coversGrantCard() cardpkg.Card {
	c := grantCard()
	c.Now, c.SelfApproval = t0.Add(5*time.Minute), true
	return c
}

// coversQuorumCard: two approvals needed, none given, self-approval off:
// the requester may not allow it.
func coversQuorumCard() cardpkg.Card {
	c := baseCard()
	c.Now = t0.Add(5 * time.Minute)
	c.Calls[1].Approvals = 2
	return c
}

// coversRestrictedCard: a rule narrowed who may decide to a person and a
// group.
func coversRestrictedCard() cardpkg.Card {
	c := baseCard()
	c.Now, c.SelfApproval = t0.Add(5*time.Minute), true
	c.Calls[1].Reasons = []confirm.Reason{{Kind: confirm.ReasonRule, Rule: "prod-deploys"}}
	c.Calls[1].Restrict = []confirm.Approvers{{Users: []string{"UDAVE"}, Groups: []string{"SOPS"}}}
	return c
}

// coversCriticalCard: a critical call on a card with grants on: Allow
// asks for the phrase, and no grant is offered because of the tier.
func coversCriticalCard() cardpkg.Card {
	c := baseCard()
	c.Now, c.SelfApproval, c.GrantFor = t0.Add(5*time.Minute), true, time.Hour
	c.Calls[1].Risk = confirm.RiskCritical
	return c
}

var coverGoldens = map[string]func() cardpkg.Card{
	"card_covers_once": coversOnceCard, "card_covers_grant": coversGrantCard, "card_covers_quorum": coversQuorumCard,
	"card_covers_restricted": coversRestrictedCard, "card_covers_critical": coversCriticalCard,
}

// TestCoversLineBesideTheButtons: each waiting call's buttons are
// followed by a context block saying what they do; decided calls have
// none.
func TestCoversLineBesideTheButtons(t *testing.T) {
	for name, want := range map[string]string{
		"card_covers_once":       "Allow runs this call once.",
		"card_covers_grant":      "Allow runs this call once. Allow for 1h also allows later calls of `deploy` in this thread, requested by <@UBOB> or an approver, until <!date^" + itoa(t0.Add(65*time.Minute).Unix()) + "^{date_short_pretty} at {time}|2026-11-29 13:05:00 UTC> if clicked now.",
		"card_covers_quorum":     "Allow is approval 1 of 2 needed; the call runs once, after the last. <@UBOB> asked for it and may not allow it.",
		"card_covers_restricted": "Allow runs this call once. Only <@UDAVE>, <!subteam^SOPS> may allow it.",
		"card_covers_critical":   "Allow asks you to type a confirmation phrase, then runs this call once. No grant: critical-risk calls are never granted.",
	} {
		blocks := Render(coverGoldens[name]())
		var got []string
		for i, b := range blocks {
			if b.ID() == "covers_2" {
				if prev := blocks[i-1].ID(); prev != "actions_2" {
					t.Errorf("%s: the line follows %s, not the buttons", name, prev)
				}
				got = append(got, string(mustJSON(b)))
			}
			if b.ID() == "covers_1" {
				t.Errorf("%s: a call nobody is asked about has a line", name)
			}
		}
		if len(got) != 1 || !strings.Contains(got[0], `"text":"`+jsonText(want)+`"`) {
			t.Errorf("%s: covers blocks %q, want one saying %q", name, got, want)
		}
	}
	if s := string(mustJSON(Render(completeCard()))); strings.Contains(s, "covers_") {
		t.Error("a decided card says what a yes covers")
	}
}

// TestCoversLineIsInert: a hostile requester, tool name and restriction
// render inert in the line: nothing Slack would act on but Airlock's own
// mentions and dates, the outside text only inside code spans that hold
// no backtick or entity.
func TestCoversLineIsInert(t *testing.T) {
	c := coversGrantCard()
	c.SelfApproval = false
	c.RequestedBy = "<!channel> @everyone *b* `x`\u202e"
	c.Calls[1].Tool = "deploy <!here> *x*"
	c.Calls[1].Restrict = []confirm.Approvers{{Users: []string{"<@UMALLORY>", "UDAVE"}, Groups: []string{"<!subteam^SOPS>"}, Roles: []string{"@everyone"}}}
	var text string
	for _, b := range Render(c) {
		if b.ID() == "covers_2" {
			text = string(mustJSON(b))
		}
	}
	if text == "" {
		t.Fatal("no line")
	}
	_, live := readBlocks(t, []byte(text))
	spans := regexp.MustCompile("`[^`]*`")
	for _, s := range spans.FindAllString(live, -1) {
		if strings.ContainsAny(s, "<>") {
			t.Errorf("code span with an entity: %s", s)
		}
	}
	if bad := liveProblems(spans.ReplaceAllString(live, " "), text); len(bad) != 0 {
		t.Fatalf("live or hidden: %v\n%s", bad, live)
	}
	if strings.Contains(live, "<@UMALLORY>") {
		t.Errorf("someone the model named is mentioned:\n%s", live)
	}
	testkit.ContainsAll(t, "the line", live,
		"later calls of `deploy &lt;!here&gt; *x*` in this thread", // literal, as every name from outside Airlock
		"requested by `&lt;!channel&gt; @everyone *b* ˋxˋ\\u202e` or an approver",
		"Only `&lt;@UMALLORY&gt;`, <@UDAVE>, group `&lt;!subteam^SOPS&gt;`, role `@everyone` may allow it.",
	)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// jsonText is s as encoding/json writes it in a string (HTML escaped).
func jsonText(s string) string {
	b := mustJSON(s)
	return string(b[1 : len(b)-1])
}

// TestCoversGiveWayToCalls: a card whose calls fit Slack's 50 blocks
// only without the lines shows every call and no line.
func TestCoversGiveWayToCalls(t *testing.T) {
	c := coversOnceCard()
	c.Calls = nil
	for i := range 18 {
		c.Calls = append(c.Calls, cardpkg.Call{Ref: confirm.Ref("abc", i), Number: i + 1, Tool: "deploy", Args: "{}", Flagged: true, Approvals: 1,
			State: cardpkg.State{Kind: cardpkg.Waiting}})
	}
	// In the messages the card is posted in, every call keeps its line.
	for i, m := range RenderMessages(c, nil) {
		if js := string(mustJSON(m.Blocks)); strings.Count(js, `"block_id":"covers_`) != 6 || strings.Contains(js, "more call") {
			t.Fatalf("message %d: calls not shown or lines dropped:\n%s", i+1, js)
		}
	}
	// A message holding more calls than it was made for (a card an
	// earlier release posted in one) drops the lines for the calls.
	blocks := RenderMessagesIn(c, nil, 1)[0].Blocks
	js := string(mustJSON(blocks))
	if len(blocks) > maxMessageBlock || strings.Contains(js, "more call") || strings.Contains(js, "covers_") {
		t.Fatalf("%d blocks; calls not shown or lines kept:\n%s", len(blocks), js)
	}
	c.Calls = c.Calls[:3]
	if js := string(mustJSON(Render(c))); strings.Count(js, `"block_id":"covers_`) != 3 {
		t.Errorf("a short card lacks its lines")
	}
}
