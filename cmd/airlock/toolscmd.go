package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"

	"github.com/airlockhq/airlock/config"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/redact"
	"github.com/airlockhq/airlock/tools"
)

// listTools prints every tool the model would be offered (config, MCP
// servers, Discord moderation) with its source and whether and why a call
// needs a person's yes (`airlock tools -config FILE`). It connects to the
// MCP servers to list theirs.
func listTools(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, secrets, set, rc := loadWithTools("airlock tools", args, stderr)
	if cfg == nil {
		return rc
	}
	source := map[string]string{}
	for _, t := range cfg.Tools {
		source[t.Name] = "config"
	}
	why := map[string]string{} // an MCP tool's own reason for its flag
	logger := slog.New(redact.NewHandler(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}), secrets))
	mcp, err := startMCP(ctx, cfg, set, logger, nil)
	if err != nil {
		fmt.Fprintf(stderr, "airlock: %v\n", err)
		return 1
	}
	if mcp != nil {
		defer mcp.Close()
		for _, info := range mcp.Tools() {
			source[info.Name] = "mcp:" + info.Server
			why[info.Name] = info.Why
		}
		for _, st := range mcp.Status() {
			if st.Err != nil {
				fmt.Fprintf(stderr, "airlock: MCP server %s: %s (its tools are absent)\n", st.Name, secrets.String(st.Err.Error()))
			}
		}
	}
	policy := confirm.NewPolicy(cfg.Confirmation.FlagHonoured(), cfg.Confirmation.Tools, cfg.Confirmation.RuleSet())
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOOL\tSOURCE\tAPPROVAL\tWHY")
	for _, name := range set.Names() {
		t, _ := set.Get(name)
		line := approvalOf(policy, name, toolInfoOf(name, t))
		if w := why[name]; w != "" {
			line += " (" + w + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", name, source[name], line)
	}
	if cfg.Discord != nil {
		for _, name := range cfg.Discord.ModerationTools {
			// Built-in tools are gated (confirm) unless confirmation.enabled is false.
			info := confirm.ToolInfo{Name: name, Confirm: true}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", name, "discord", approvalOf(policy, name, info))
		}
	}
	tw.Flush()
	return 0
}

func toolInfoOf(name string, t tools.Tool) confirm.ToolInfo {
	info := confirm.ToolInfo{Name: name, Confirm: t.Confirm()}
	if a, ok := t.(interface{ Approvals() int }); ok {
		info.Approvals = a.Approvals()
	}
	return info
}

// approvalOf says whether every call of the tool needs approval (its flag,
// confirmation.tools), only some (rules over the arguments), or none, and
// why: "always\tthe tool needs approval", "by rule\tprod-restarts".
func approvalOf(policy confirm.Policy, name string, info confirm.ToolInfo) string {
	v := policy.Evaluate(confirm.Request{Call: confirm.ToolCall{Name: name, Args: json.RawMessage("{}")}, Tool: &info})
	var always, rules []string
	for _, r := range v.Reasons {
		switch r.Kind {
		case confirm.ReasonToolFlag, confirm.ReasonConfirmationTools:
			always = append(always, r.String())
		case confirm.ReasonRule, confirm.ReasonRuleError:
			rules = append(rules, r.Rule)
		}
	}
	switch {
	case v.Deny && len(always) == 0:
		return "may be refused\trule " + v.DenyRule
	case len(always) > 0:
		return "always\t" + strings.Join(always, "; ")
	case len(rules) > 0:
		return "depends on the arguments\trules " + strings.Join(rules, ", ")
	case confirm.MayAsk(policy, confirm.Request{Call: confirm.ToolCall{Name: name}, Tool: &info}):
		// No rule asks for empty arguments, but one may for others.
		return "depends on the arguments\tan ask rule may match"
	}
	return "no\t-"
}

// loadWithTools parses `-config FILE` for the command, loads the config
// and builds its config tools, for the commands that list them. A nil
// config means it could not, and rc is the exit code (2: bad flags).
func loadWithTools(command string, args []string, stderr io.Writer) (cfg *config.Config, secrets *redact.Redactor, set *tools.Set, rc int) {
	fs, cfgPath := configFlags(command, stderr)
	if err := fs.Parse(args); err != nil {
		return nil, nil, nil, 2
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		fmt.Fprintf(stderr, "airlock: %v\n", err)
		return nil, nil, nil, 1
	}
	secrets = redact.New(cfg.Secrets())
	if set, err = tools.New(cfg.Tools, tools.Options{Redactor: secrets}); err != nil {
		fmt.Fprintf(stderr, "airlock: %v\n", err)
		return nil, nil, nil, 1
	}
	return cfg, secrets, set, 0
}
