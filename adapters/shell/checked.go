package shell

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/airlockhq/airlock/bot"
	cardpkg "github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
)

// Unknown outcomes. A run whose outcome is unknown gates its tool until
// the local user marks it checked: /checked lists such runs of the
// conversation, /checked N marks one (the bot audits it), after which
// the tool's calls are judged as usual again.

var _ bot.UnknownNoticer = (*Shell)(nil)

// checkHint tells what an unchecked unknown run means and how to go on.
func checkHint(tool string) string {
	return "until marked checked, every call of " + oneLine(tool) + " needs a yes; /checked lists runs to mark checked"
}

// PostUnknownNotice prints the line of a call no card showed. Its
// reference is the call's batch id, as for a card: the shell's clicks
// carry it as Click.Message.
func (s *Shell) PostUnknownNotice(_ context.Context, _ bot.Thread, n cardpkg.UnknownNotice) (string, error) {
	batchID, _, err := confirm.ParseCheckedRef(n.Check.Ref)
	if err != nil {
		return "", fmt.Errorf("shell: unknown outcome notice: %w", err)
	}
	s.printf("airlock: ⚠ outcome unknown for call %d (%s: %s) of request %s: it may or may not have taken effect; it was not retried.\n  %s\n",
		n.Number, oneLine(n.Tool), oneLine(n.Summary), short(batchID), checkHint(n.Tool))
	return batchID, nil
}

// UpdateUnknownNotice prints who marked the run checked.
func (s *Shell) UpdateUnknownNotice(_ context.Context, _ bot.Thread, ref string, n cardpkg.UnknownNotice) error {
	if n.Check.Done() {
		s.printf("airlock: call %d (%s) of request %s: %s; later calls of %s are judged as usual.\n",
			n.Number, oneLine(n.Tool), short(ref), oneLine(n.Check.Text()), oneLine(n.Tool))
	}
	return nil
}

// CheckedUsage explains /checked.
const CheckedUsage = "Usage: /checked lists runs whose outcome is unknown; /checked N marks run N checked once you know whether it took effect."

// checked handles "/checked" (list) and "/checked N" (mark run N).
func (s *Shell) checked(ctx context.Context, b Bot, rest string) {
	runs, err := b.UncheckedRuns(ctx, s.thread())
	if err != nil {
		s.printf("error: %v\n", err)
		return
	}
	if rest == "" {
		if len(runs) == 0 {
			s.printf("No run with an unknown outcome waits to be checked.\n")
			return
		}
		var w strings.Builder
		w.WriteString("Runs whose outcome is unknown (each gates its tool until checked):\n")
		for i, n := range runs {
			batchID, _, _ := confirm.ParseCheckedRef(n.Check.Ref)
			fmt.Fprintf(&w, "  %d. request %s, call %d: %s: %s\n", i+1, short(batchID), n.Number, oneLine(n.Tool), oneLine(n.Summary))
		}
		w.WriteString(CheckedUsage + "\n")
		s.printf("%s", w.String())
		return
	}
	k, err := strconv.Atoi(rest)
	if err != nil || k < 1 || k > len(runs) || strconv.Itoa(k) != rest {
		if len(runs) == 0 {
			s.printf("No run with an unknown outcome waits to be checked.\n")
			return
		}
		s.printf("%q is not a run number (1-%d); /checked lists them.\n", oneLine(rest), len(runs))
		return
	}
	n := runs[k-1]
	batchID, _, err := confirm.ParseCheckedRef(n.Check.Ref)
	if err != nil {
		s.printf("%s\n", bot.UserMessage(err))
		return
	}
	if _, err := s.interact(ctx, b, s.click(batchID, cardpkg.ActChecked, n.Check.Ref, "")); err != nil {
		s.printf("%s\n", clickProblem(err))
		return
	}
	s.printf("Marked checked: call %d (%s) of request %s.\n", n.Number, oneLine(n.Tool), short(batchID))
}
