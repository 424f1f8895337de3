package card

import (
	"strings"

	"github.com/airlockhq/airlock/confirm"
)

// Run is the message of a runbook run, posted when it starts and edited
// as it goes: the runbook, who started it, the parameters, every step
// with where it stands (so the whole plan shows from the start), and the
// buttons a person may press on it. Renderers lay it out; the words and
// the buttons are chosen here. Everything in it that a model, a tool or
// a person wrote (the parameters, results in the step states, people's
// names) is shown inert.
type Run struct {
	ID          string
	Runbook     string // the runbook's name (config: [a-z0-9_-])
	RequestedBy string // platform user id of who started it
	Status      confirm.RunbookStatus
	Params      string // the parameters as JSON; "" or "{}" when none
	Steps       []RunStep
	// HaltedAt is the step whose outcome is unknown (Status halted).
	HaltedAt string
	// PageURL is the run's page on the web console (web.base_url); ""
	// without the console.
	PageURL string
}

// Footer is the run message's last line: the link to its page on the web
// console; none without it.
func (r Run) Footer() []Line {
	if r.PageURL == "" {
		return nil
	}
	return []Line{{Parts: []Part{{Kind: Link, Text: PageLinkWords, URL: r.PageURL}}}}
}

// RunStep is one step's line on the run message.
type RunStep struct {
	ID    string // the step's id (config: [a-z0-9_])
	Tool  string
	State string // where it stands, in words: "succeeded (15ms)", "failed (…)"
}

// Title is the run message's first line.
func (r Run) Title() string {
	return "Runbook " + r.Runbook + " (run " + r.ID + "), started by " + r.RequestedBy + ": " + string(r.Status)
}

// ParamsLine is the parameters' line, "" when there are none.
func (r Run) ParamsLine() string {
	if r.Params == "" || r.Params == "{}" {
		return ""
	}
	return "Parameters: " + r.Params
}

// Line is a step's line.
func (s RunStep) Line() string { return "- " + s.ID + " (" + s.Tool + "): " + s.State }

// Note says what a halted run waits for ("" otherwise).
func (r Run) Note() string {
	if r.Status != confirm.RunbookHalted {
		return ""
	}
	return "Halted at " + r.HaltedAt + ": its outcome is unknown. Approvers: Mark done, Retry or Stop."
}

// Lines are the run message as text, line by line: the title, the
// parameters, the steps and a halted run's note.
func (r Run) Lines() []string {
	out := []string{r.Title()}
	if p := r.ParamsLine(); p != "" {
		out = append(out, p)
	}
	for _, s := range r.Steps {
		out = append(out, s.Line())
	}
	if n := r.Note(); n != "" {
		out = append(out, n)
	}
	return out
}

// Text is Lines joined.
func (r Run) Text() string { return strings.Join(r.Lines(), "\n") }

// Actions are the run message's buttons: Stop run while the run goes or
// is halted (its requester or an approver may press it); on a halted run
// also Mark done and Retry (approvers). An ended run offers none. Each
// carries the run's reference only; the bot checks who pressed it.
func (r Run) Actions() []Action {
	ref := confirm.RunRef(r.ID)
	stop := Action{Kind: ActRunStop, Ref: ref, Label: "Stop run", NumberedLabel: "Stop run",
		A11yLabel: "Stop runbook " + r.Runbook + ": the waiting step is denied, nothing more runs", Emphasis: Danger}
	switch r.Status {
	case confirm.RunbookRunning:
		return []Action{stop}
	case confirm.RunbookHalted:
		stop.Label, stop.NumberedLabel = "Stop", "Stop"
		return []Action{
			{Kind: ActRunMarkDone, Ref: ref, Label: "Mark done", NumberedLabel: "Mark done",
				A11yLabel: "Mark step " + r.HaltedAt + " done: treat it as succeeded and go on", Emphasis: Primary},
			{Kind: ActRunRetry, Ref: ref, Label: "Retry", NumberedLabel: "Retry",
				A11yLabel: "Retry step " + r.HaltedAt + " as a new attempt, which needs approval"},
			stop,
		}
	}
	return nil
}
