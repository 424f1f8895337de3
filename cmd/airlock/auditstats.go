package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/airlockhq/airlock/storage"
)

// auditStats prints the decision figures of the audit: per tool, per
// approver, and the tools whose approval looks like reflex.
func auditStats(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("airlock audit stats", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "airlock.yaml", "path to the config file")
	since := fs.String("since", "7d", "only rows at or after this time (RFC 3339) or this long ago (e.g. 7d, 24h); 0 for all")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 0 {
		fmt.Fprintln(stderr, "usage: airlock audit stats -config FILE [-since 7d] [-json]")
		return 2
	}
	w, err := parseWhen("since", *since)
	if err != nil {
		fmt.Fprintf(stderr, "airlock: %v\n", err)
		return 2
	}
	_, db, err := openStore(ctx, *cfgPath)
	if err != nil {
		fmt.Fprintf(stderr, "airlock: %v\n", err)
		return 1
	}
	defer db.Close()
	s, err := db.AuditStats(ctx, w.time(db.Clock())) // durations before the clock replicas share
	if err != nil {
		fmt.Fprintf(stderr, "airlock: audit stats: %v\n", err)
		return 1
	}
	if *asJSON {
		type stamped struct {
			storage.ToolStats
			Setting string `json:"setting"`
		}
		out := struct {
			storage.AuditStats
			RubberStamped []stamped `json:"rubber_stamped"`
		}{AuditStats: s, RubberStamped: []stamped{}}
		for _, t := range s.RubberStamped() {
			out.RubberStamped = append(out.RubberStamped, stamped{t, stampSetting(t)})
		}
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			fmt.Fprintf(stderr, "airlock: %v\n", err)
			return 1
		}
		return 0
	}
	printStats(stdout, s)
	return 0
}

// stampSetting is the setting that would cover a rubber-stamped tool's
// calls instead of a card each time.
func stampSetting(t storage.ToolStats) string {
	return fmt.Sprintf("gate only the risky calls: drop tools[].confirm (or its confirmation.tools entry) for %s and add a confirmation.rules entry "+
		"{name: %s-risky, when: 'tool == %q && <the risky arguments>', action: ask}; or let one allow cover a thread's repeats with a grant "+
		"(Allow for 1h: confirmation.grants.enabled, confirmation.grants.duration up to 24h; %d made, %d used)", t.Tool, t.Tool, t.Tool, t.GrantsMade, t.GrantsUsed)
}

func printStats(w io.Writer, s storage.AuditStats) {
	from := "the first row"
	if !s.Since.IsZero() {
		from = s.Since.UTC().Format(time.DateTime) + " UTC"
	}
	fmt.Fprintf(w, "decisions since %s\n\n", from)
	if len(s.Tools) == 0 {
		fmt.Fprintln(w, "no cards recorded")
		return
	}
	secs := func(f float64) string { return fmt.Sprintf("%.1fs", f) }
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	// CARDS = ALLOWED + DENIED + EXPIRED + ABANDONED + WAITING; EDITED are
	// among the allowed.
	fmt.Fprintln(tw, "TOOL\tCARDS\tALLOWED\tDENIED\tEXPIRED\tABANDONED\tWAITING\tEDITED\tMEDIAN\tP90\tALLOWED <10s\tGRANTS MADE\tGRANTS USED")
	for _, t := range s.Tools {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%.0f%%\t%d\t%d\n", t.Tool, t.Cards, t.Allowed, t.Denied, t.Expired, t.Abandoned, t.Waiting, t.Edited,
			secs(t.MedianSeconds), secs(t.P90Seconds), 100*t.AllowedWithin10s, t.GrantsMade, t.GrantsUsed)
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	// PASSKEY and FRESH SIGN-IN: decisions made on the console's page with
	// that proof (step-up); the rest were chat clicks.
	fmt.Fprintln(tw, "APPROVER\tDECISIONS\tMEDIAN\tPASSKEY\tFRESH SIGN-IN")
	for _, a := range s.Approvers {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\n", a.Approver, a.Decisions, secs(a.MedianSeconds), a.Passkey, a.SSO)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nrubber-stamped? (allowed in >= %.0f%% of >= %d cards, median under %s)\n", 100*storage.StampShare, storage.StampMinCards, storage.StampWithin)
	stamped := s.RubberStamped()
	if len(stamped) == 0 {
		fmt.Fprintln(w, "  none")
	}
	for _, t := range stamped {
		fmt.Fprintf(w, "  %s: %d of %d cards allowed, median %s\n    %s\n", t.Tool, t.Allowed, t.Cards, secs(t.MedianSeconds), stampSetting(t))
	}
}
