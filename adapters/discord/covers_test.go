package discord

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
)

// coverCard is the sample card with one call waiting (restart_service),
// rendered at 16:10.
func coverCard() card.Card {
	c := sampleCard()
	c.Calls = c.Calls[:2]
	c.Now, c.SelfApproval = c.CreatedAt.Add(5*time.Minute), true
	return c
}

// TestRenderCoversGolden: under each waiting call, a field says what its
// buttons do: once; with "Allow for 1h", what the grant also allows and
// until when; with two approvals needed, that the requester may not
// allow it; who may when a rule narrowed it; for a critical call, the
// typed phrase and no grant.
func TestRenderCoversGolden(t *testing.T) {
	until := coverCard().Now.Add(time.Hour)
	cases := []struct {
		name string
		edit func(*card.Card)
		want string
	}{
		{"card_covers_once.json", func(c *card.Card) {}, "Allow runs this call once."},
		{"card_covers_grant.json", func(c *card.Card) { c.GrantFor, c.Calls[1].Grantable = time.Hour, true },
			fmt.Sprintf("Allow runs this call once. Allow for 1h also allows later calls of restart\\_service in this thread, requested by <@%s> or an approver, until <t:%d:f> if clicked now.", requester, until.Unix())},
		{"card_covers_quorum.json", func(c *card.Card) { c.SelfApproval, c.Calls[1].Approvals = false, 2 },
			fmt.Sprintf("Allow is approval 1 of 2 needed; the call runs once, after the last. <@%s> asked for it and may not allow it.", requester)},
		{"card_covers_restricted.json", func(c *card.Card) {
			c.Calls[1].Restrict = []confirm.Approvers{{Users: []string{moderator}, Roles: []string{modRole}}}
		}, fmt.Sprintf("Allow runs this call once. Only <@%s>, <@&%s> may allow it.", moderator, modRole)},
		{"card_covers_critical.json", func(c *card.Card) { c.GrantFor, c.Calls[1].Risk = time.Hour, confirm.RiskCritical },
			"Allow asks you to type a confirmation phrase, then runs this call once. No grant: critical-risk calls are never granted."},
	}
	for _, tc := range cases {
		c := coverCard()
		tc.edit(&c)
		golden(t, tc.name, render(c))
		_, embeds, _ := Render(c)
		if got := field(embedMap(t, embeds[1]), coverLabel); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
		if got := field(embedMap(t, embeds[0]), coverLabel); got != "" {
			t.Errorf("%s: a call nobody is asked about says %q", tc.name, got)
		}
	}
	done := coverCard()
	at := done.Now
	done.Calls[1].State = card.State{Kind: card.Allowed, By: moderator, At: &at}
	_, embeds, _ := Render(done)
	if got := field(embedMap(t, embeds[1]), coverLabel); got != "" {
		t.Errorf("a decided call says %q", got)
	}
}

// TestCoversFieldIsInert: a hostile tool name, requester and restriction
// render inert: no live markup but Airlock's own mentions of real ids.
func TestCoversFieldIsInert(t *testing.T) {
	c := coverCard()
	c.SelfApproval, c.GrantFor, c.Calls[1].Grantable = false, time.Hour, true
	c.RequestedBy = "@everyone <@" + spammer + "> **b** ||x||\u202e"
	c.Calls[1].Tool = "restart <@&" + modRole + "> @here [x](https://evil) `"
	c.Calls[1].Restrict = []confirm.Approvers{{Users: []string{"<@" + spammer + ">", moderator}, Roles: []string{"@everyone"}}}
	_, embeds, _ := Render(c)
	got := field(embedMap(t, embeds[1]), coverLabel)
	if got == "" {
		t.Fatal("no field")
	}
	if bad := liveMarkup(got); len(bad) != 0 {
		t.Fatalf("live: %v\n%s", bad, got)
	}
	if strings.Contains(got, "<@"+spammer+">") {
		t.Errorf("someone the model named is mentioned: %s", got)
	}
	if !strings.Contains(got, "<@"+moderator+">") {
		t.Errorf("the restriction's approver not named: %s", got)
	}
}
