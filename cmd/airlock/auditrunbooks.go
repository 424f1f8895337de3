package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
)

// printRunbookEvents prints the runbook runs of the audit, one line per
// event: a run's start (its parameters), each step's outcome (and result),
// its end. Nothing when no run is recorded.
func printRunbookEvents(w io.Writer, events []confirm.AuditEvent) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := false
	for _, e := range events {
		var d struct {
			RunID      string          `json:"run_id"`
			Runbook    string          `json:"runbook"`
			Params     json.RawMessage `json:"params"`
			Step       string          `json:"step"`
			Attempt    int             `json:"attempt"`
			Outcome    string          `json:"outcome"`
			Result     string          `json:"result"`
			FailedStep string          `json:"failed_step"`
		}
		var what string
		switch e.Kind {
		case confirm.AuditRunbookStarted:
			_ = json.Unmarshal([]byte(e.Detail), &d)
			what = "started " + card.Excerpt(card.OneLine(string(d.Params)), 200)
		case confirm.AuditRunbookStep:
			_ = json.Unmarshal([]byte(e.Detail), &d)
			what = fmt.Sprintf("step %s (%s, attempt %d): %s", d.Step, e.Tool, d.Attempt, d.Outcome)
			if d.Result != "" {
				what += ": " + card.Excerpt(card.OneLine(d.Result), 80)
			}
			if e.BatchID != "" {
				what += " [call " + shortID(e.BatchID) + "/" + e.CallKey + "]"
			}
		case confirm.AuditRunbookFinished:
			_ = json.Unmarshal([]byte(e.Detail), &d)
			what = "finished: " + d.Outcome
			if d.FailedStep != "" {
				what += " at " + d.FailedStep
			}
		default:
			continue
		}
		if !header {
			fmt.Fprintln(w)
			fmt.Fprintln(tw, "RUNBOOK (UTC)\tCONV\tRUN\tRUNBOOK\tBY\tEVENT")
			header = true
		}
		name := e.Tool
		if d.Runbook != "" {
			name = d.Runbook
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", e.At.UTC().Format(time.DateTime), e.ConversationID, shortID(d.RunID), name, e.Actor, what)
	}
	tw.Flush()
}
