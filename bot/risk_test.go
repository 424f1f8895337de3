package bot_test

import (
	"context"
	"errors"
	"testing"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/confirm"
)

// A call a rule rates high is carded although a grant covers its tool in
// the thread, is offered no "Allow for", and refuses a grant click.
func TestHighRiskCallIsNeverCoveredByAGrant(t *testing.T) {
	prodIsHigh := confirm.PolicyFunc(func(r confirm.Request) confirm.Verdict {
		if r.Call.Name == "deploy" && string(r.Call.Args) == `{"env":"production"}` {
			return confirm.Verdict{Ask: true, Risk: confirm.RiskHigh, Reasons: []confirm.Reason{{Kind: confirm.ReasonRule, Rule: "prod"}}}
		}
		return confirm.Verdict{}
	})
	h := newHarnessWith(t, "", withPolicy(prodIsHigh, nil))
	grantFirstDeploy(t, h)
	cards := len(h.plat.Cards)

	h.push(calls(tc("", "deploy", `{"env":"production"}`)), text("prod"))
	h.turn("bob", "deploy to production")
	if len(h.plat.Cards) != cards+1 || h.tools["deploy"].Runs.Load() != 1 {
		t.Fatalf("a grant covered a high-risk call (%d cards, %d runs)", len(h.plat.Cards)-cards, h.tools["deploy"].Runs.Load())
	}
	c := h.plat.Cards[cards].Calls[0] // as posted
	if c.Grantable || c.RiskLabel() != "high risk" {
		t.Fatalf("card call %+v: want no Allow for and the label high risk", c)
	}
	grant := bot.Click{Platform: "test", Channel: "C1", User: "alice", Ref: c.Ref, Message: cardMsg(c.Ref), Allow: true, Grant: true}
	if err := h.bot.Decide(context.Background(), grant); !errors.Is(err, bot.ErrNotGrantable) {
		t.Fatalf("a grant click on a high-risk call: %v", err)
	}
	if err := clickOn(h, "alice", c.Ref, cardMsg(c.Ref), true); err != nil || h.tools["deploy"].Runs.Load() != 2 {
		t.Fatalf("Allow: %v, runs %d", err, h.tools["deploy"].Runs.Load())
	}
}

// The tool's own tier reaches the stored call and the card; the highest
// of the tool's and a rule's wins; a low tier stays grantable.
func TestToolRiskOnTheCard(t *testing.T) {
	lowRule := ruleFor("deploy", confirm.Verdict{Ask: true, Risk: confirm.RiskLow})
	h := newHarnessWith(t, "", withPolicy(lowRule, nil))
	h.tools["deploy"].Rating = confirm.RiskCritical
	h.push(calls(tc("", "deploy", `{}`)))
	h.turn("bob", "deploy")
	c := h.plat.LastCard()
	if got := c.Calls[0].RiskLabel(); got != "critical risk" || c.Calls[0].Grantable {
		t.Fatalf("label %q, grantable %v: want critical risk, not grantable", got, c.Calls[0].Grantable)
	}
	batch, err := h.store.PendingBatch(context.Background(), 1)
	if err != nil || batch.Calls[0].Risk != confirm.RiskCritical {
		t.Fatalf("stored risk: %v %v", batch, err)
	}

	h2 := newHarnessWith(t, "", withPolicy(lowRule, nil))
	h2.tools["deploy"].Rating = confirm.RiskLow
	h2.push(calls(tc("", "deploy", `{}`)))
	h2.turn("bob", "deploy")
	if c := h2.plat.LastCard().Calls[0]; c.RiskLabel() != "low risk" || !c.Grantable {
		t.Fatalf("low: %+v", c)
	}
	h3 := newHarnessWith(t, "", withPolicy(nil, nil))
	h3.push(calls(tc("", "deploy", `{}`)))
	h3.turn("bob", "deploy")
	if c := h3.plat.LastCard().Calls[0]; c.RiskLabel() != "" || !c.Grantable || c.Risk != confirm.RiskMedium {
		t.Fatalf("default: %+v", c)
	}
}
