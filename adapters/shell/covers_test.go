package shell

import (
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/internal/testkit"
)

// TestRenderCoversGolden: under each waiting call's outcome, a line says
// what /allow does in this card's case. The terminal offers no "Allow
// for", so it never speaks of grants.
func TestRenderCoversGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*card.Card)
		want string
	}{
		{"card_covers_once.txt", func(c *card.Card) {}, "|     Allow runs this call once.\n"},
		{"card_covers_grant.txt", func(c *card.Card) { c.GrantFor, c.Calls[1].Grantable = time.Hour, true }, "|     Allow runs this call once.\n"},
		{"card_covers_quorum.txt", func(c *card.Card) { c.SelfApproval, c.Calls[1].Approvals = false, 2 },
			"|     Allow is approval 1 of 2 needed; the call runs once, after the last. local asked for it and may not allow it.\n"},
		{"card_covers_restricted.txt", func(c *card.Card) {
			c.Calls[1].Restrict = []confirm.Approvers{{Users: []string{"oncall"}, Groups: []string{"sre"}}}
		}, "|     Allow runs this call once. Only oncall, group sre may allow it.\n"},
		{"card_covers_critical.txt", func(c *card.Card) { c.GrantFor, c.Calls[1].Risk = time.Hour, confirm.RiskCritical },
			"|     Allow asks you to type a confirmation phrase, then runs this call once.\n"},
	} {
		c := sampleCard()
		c.Now = c.ExpiresAt.Add(-25 * time.Minute)
		tc.edit(&c)
		out := Render(c)
		golden(t, tc.name, out)
		if strings.Count(out, "Allow ") != 1 || !strings.Contains(out, "-> waiting for a decision"+waitingTail(c)+"\n"+tc.want) {
			t.Errorf("%s: want the line %q under the outcome:\n%s", tc.name, tc.want, out)
		}
		if strings.Contains(out, "grant") {
			t.Errorf("%s: the terminal speaks of grants:\n%s", tc.name, out)
		}
	}
}

func waitingTail(c card.Card) string {
	if c.Calls[1].Approvals > 1 {
		return ": 0 of 2 approvals"
	}
	return ""
}

// TestCoversLineIsInert: a hostile tool name and requester print with
// their controls escaped; the line stays one line.
func TestCoversLineIsInert(t *testing.T) {
	c := sampleCard()
	c.SelfApproval = false
	c.RequestedBy = "evil\x1b[2J\n\u202eperson"
	c.Calls[1].Restrict = []confirm.Approvers{{Users: []string{"x\x1b]0;pwned\x07"}}}
	out := Render(c)
	inert(t, "the card", out)
	testkit.ContainsAll(t, "the card", out, `|     Allow runs this call once. evil\u001b[2J \u202eperson asked for it and may not allow it. Only x\u001b]0;pwned\u0007 may allow it.`)
}
