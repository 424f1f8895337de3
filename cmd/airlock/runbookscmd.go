package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/airlockhq/airlock/config"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/redact"
	"github.com/airlockhq/airlock/runbook"
	"github.com/airlockhq/airlock/tools"
)

// listRunbooks prints every runbook (`airlock runbooks -config FILE`): its
// parameters, its steps, and for each step whether and why it needs
// approval as far as can be known before a run (its tool's flag,
// confirmation.tools, rules that may ask, the step's confirm and
// approvals). It connects to the MCP servers, as `airlock tools` does.
func listRunbooks(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, secrets, set, rc := loadWithTools("airlock runbooks", args, stderr)
	if cfg == nil {
		return rc
	}
	rbs := cfg.RunbookSet()
	if len(rbs) == 0 {
		fmt.Fprintln(stdout, "no runbooks configured")
		return 0
	}
	logger := slog.New(redact.NewHandler(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}), secrets))
	mcp, err := startMCP(ctx, cfg, set, logger, nil)
	if err != nil {
		fmt.Fprintf(stderr, "airlock: %v\n", err)
		return 1
	}
	if mcp != nil {
		defer mcp.Close()
		for _, st := range mcp.Status() {
			if st.Err != nil {
				fmt.Fprintf(stderr, "airlock: MCP server %s: %s (its tools are absent)\n", st.Name, secrets.String(st.Err.Error()))
			}
		}
	}
	policy := confirm.NewPolicy(cfg.Confirmation.FlagHonoured(), cfg.Confirmation.Tools, cfg.Confirmation.RuleSet())
	lookup := func(name string) (confirm.ToolInfo, bool) {
		if t, ok := set.Get(name); ok {
			return toolInfoOf(name, t), true
		}
		if cfg.Discord != nil && slices.Contains(cfg.Discord.ModerationTools, name) {
			return confirm.ToolInfo{Name: name, Confirm: true}, true // built-ins are gated
		}
		return confirm.ToolInfo{}, false
	}
	for i, r := range rbs {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		writeRunbook(stdout, r, policy, lookup)
	}
	return 0
}

// writeRunbook prints one runbook.
func writeRunbook(w io.Writer, r *runbook.Runbook, policy confirm.Policy, lookup func(string) (confirm.ToolInfo, bool)) {
	fmt.Fprintf(w, "runbook %s", r.Name())
	if d := strings.TrimSpace(r.Description()); d != "" {
		fmt.Fprintf(w, ": %s", d)
	}
	fmt.Fprintf(w, "\n  start: run %s", r.Name())
	for _, p := range r.ParamSpecs() {
		if p.Required {
			fmt.Fprintf(w, " %s=…", p.Name)
		}
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if specs := r.ParamSpecs(); len(specs) > 0 {
		fmt.Fprintln(tw, "  PARAMETER\tTYPE\tREQUIRED\tDEFAULT\tALLOWED")
		for _, p := range specs {
			typ, req, def, allowed := p.Type, "no", "-", "any"
			if typ == "" {
				typ = "any"
			}
			if p.Required {
				req = "yes"
			}
			if p.HasDefault {
				def = jsonText(p.Default)
			}
			if len(p.Enum) > 0 {
				var vs []string
				for _, e := range p.Enum {
					vs = append(vs, jsonText(e))
				}
				allowed = strings.Join(vs, ", ")
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", p.Name, typ, req, def, allowed)
		}
		tw.Flush()
	}
	fmt.Fprintln(tw, "  STEP\tTOOL\tAPPROVAL\tWHY")
	for _, s := range r.Steps() {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", s.ID(), s.Tool(), stepApproval(policy, lookup, s))
	}
	for _, s := range r.OnFailure() {
		fmt.Fprintf(tw, "  %s (on failure)\t%s\t%s\n", s.ID(), s.Tool(), stepApproval(policy, lookup, s))
	}
	tw.Flush()
}

// stepApproval is approvalOf for a step's tool, with what the step adds
// (confirm, approvals) and its retries: "always\tthe tool needs approval;
// the step says confirm; at least 2 approvers".
func stepApproval(policy confirm.Policy, lookup func(string) (confirm.ToolInfo, bool), s *runbook.Step) string {
	info, ok := lookup(s.Tool())
	if !ok {
		return "refuses to start\tno tool " + s.Tool()
	}
	line := approvalOf(policy, s.Tool(), info)
	verdict, why, _ := strings.Cut(line, "\t")
	var add []string
	if s.Confirm() {
		add = append(add, "the step says confirm")
		if verdict != "always" {
			verdict = "always"
			why = ""
		}
	}
	if n := s.Approvals(); n > 0 {
		add = append(add, fmt.Sprintf("at least %d approvers (the step)", n))
	}
	if s.Attempts() > 1 {
		add = append(add, fmt.Sprintf("an approval covers up to %d attempts", s.Attempts()))
	}
	if len(add) > 0 {
		if why == "" || why == "-" {
			why = strings.Join(add, "; ")
		} else {
			why += "; " + strings.Join(add, "; ")
		}
	}
	return verdict + "\t" + why
}

func jsonText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// checkRunbookTools says, once the MCP servers listed their tools, which
// runbooks lack a tool: such a runbook refuses to start, saying which (its
// run checks again when it starts).
func checkRunbookTools(cfg *config.Config, set *tools.Set, logger *slog.Logger) {
	has := func(n string) bool {
		return set.Has(n) || cfg.Discord != nil && slices.Contains(cfg.Discord.ModerationTools, n)
	}
	for _, r := range cfg.RunbookSet() {
		if err := r.CheckTools(has); err != nil {
			logger.Warn("runbook: a tool is missing; it refuses to start until the tool exists", "runbook", r.Name(), "err", err)
		}
	}
}
