package rules

import (
	"testing"

	"github.com/airlockhq/airlock/confirm"
)

// A tool some ask rule could gate, whatever the arguments, requester and
// time, may ask; a tool no ask rule can match never does.
func TestMayAsk(t *testing.T) {
	s := mustCompile(t,
		ask("prod-deploys", `tool == "deploy" && args.environment == "production"`),
		ask("db-in-prod", `channel == "C0PROD" && tool.startsWith("db_")`),
		ask("after-hours", `now.getHours() > 18 && tool in ["restart", "scale"]`),
		ask("bob", `user == "U0BOB" && tool == "notify"`),
		ask("big", `size(args) > 3 && tool != "status" && tool != "drop" && tool != "db_read" && tool != "other"`),
		Config{Name: "no-drops", When: `tool == "drop"`, Action: ActionDeny},
	)
	at := func(tool, channel string) confirm.Request {
		return confirm.Request{Call: confirm.ToolCall{Name: tool}, Platform: "slack", Channel: channel}
	}
	for _, tc := range []struct {
		tool, channel string
		want          bool
	}{
		{"deploy", "C0OPS", true},   // an argument decides
		{"db_read", "C0PROD", true}, // the channel matches
		{"db_read", "C0DEV", false}, // the channel never does
		{"restart", "C0OPS", true},  // the time decides
		{"notify", "C0OPS", true},   // the requester decides
		{"status", "C0OPS", false},  // no ask rule can match
		{"drop", "C0OPS", false},    // only a deny rule matches: refused, not asked
		{"other", "C0OPS", false},
	} {
		if got := s.MayAsk(at(tc.tool, tc.channel)); got != tc.want {
			t.Errorf("MayAsk(%s in %s) = %v, want %v", tc.tool, tc.channel, got, tc.want)
		}
	}
	var none *Set
	if none.MayAsk(at("deploy", "C0OPS")) {
		t.Error("a nil Set may ask")
	}
	// Through confirm.All, as the bot holds the policy.
	p := confirm.NewPolicy(true, nil, s)
	if !confirm.MayAsk(p, at("deploy", "C0OPS")) || confirm.MayAsk(p, at("status", "C0OPS")) {
		t.Error("confirm.NewPolicy hides the rules' MayAsk")
	}
}

// A rule whose expression errors for the tool may ask (an evaluation error
// asks).
func TestMayAskOnError(t *testing.T) {
	s := mustCompile(t, ask("odd", `int(tool) > 3`))
	if !s.MayAsk(confirm.Request{Call: confirm.ToolCall{Name: "deploy"}}) {
		t.Error("a rule that errors does not count as one that may ask")
	}
}
