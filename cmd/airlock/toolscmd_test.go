package main

import (
	"strings"
	"testing"

	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/rules"
)

// A tool only an ask rule gates, for some arguments in some channel, is
// listed as depending on the arguments, not as never needing approval; a
// tool no rule can gate stays "no".
func TestApprovalOfRuleGatedTool(t *testing.T) {
	set, err := rules.Compile([]rules.Config{{
		Name: "prod-restarts", Action: "ask",
		When: `tool == "restart" && channel == "C0PROD" && has(args.env) && args.env == "production"`,
	}})
	if err != nil {
		t.Fatal(err)
	}
	policy := confirm.NewPolicy(true, nil, set)
	if got := approvalOf(policy, "restart", confirm.ToolInfo{Name: "restart"}); !strings.HasPrefix(got, "depends on the arguments") {
		t.Fatalf("restart: %q, want it to depend on the arguments", got)
	}
	if got := approvalOf(policy, "status", confirm.ToolInfo{Name: "status"}); !strings.HasPrefix(got, "no\t") {
		t.Fatalf("status: %q, want no", got)
	}
}
