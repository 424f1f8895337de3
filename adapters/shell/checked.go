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

// checkHint is how to mark an unknown run checked here: the terminal's
// command for "I checked — go on".
func checkHint() string { return "/checked lists runs to mark checked" }

// PostUnknownNotice prints the line of a call no card showed
// (card.UnknownNotice.Notice): its lines, the read-back quoted, and the
// command that is its button. Its reference is the call's batch id, as
// for a card: the shell's clicks carry it as Click.Message.
func (s *Shell) PostUnknownNotice(_ context.Context, _ bot.Thread, n cardpkg.UnknownNotice) (string, error) {
	batchID, _, err := confirm.ParseCheckedRef(n.Check.Ref)
	if err != nil {
		return "", fmt.Errorf("shell: unknown outcome notice: %w", err)
	}
	nt := n.Notice()
	var w strings.Builder
	for i, l := range nt.Lines {
		if i == 0 {
			fmt.Fprintf(&w, "airlock: ⚠ %s\n", line(l))
			if q := oneLine(nt.Quote); q != "" {
				fmt.Fprintf(&w, "  > %s\n", q)
			}
			continue
		}
		fmt.Fprintf(&w, "  %s\n", line(l))
	}
	if len(nt.Foot.Parts) > 0 {
		fmt.Fprintf(&w, "  %s (%s)\n", line(nt.Foot), checkHint())
	}
	s.printf("%s", w.String())
	return batchID, nil
}

// UpdateUnknownNotice prints who marked the run checked.
func (s *Shell) UpdateUnknownNotice(_ context.Context, _ bot.Thread, ref string, n cardpkg.UnknownNotice) error {
	if n.Check.Done() {
		nt := n.Notice()
		s.printf("airlock: ⚠ %s\n  %s\n", line(nt.Lines[0]), line(nt.Lines[len(nt.Lines)-1]))
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
	c := bot.Click{Platform: Platform, Channel: s.Channel, Message: batchID, User: s.User, Ref: n.Check.Ref}
	if err := b.MarkChecked(ctx, c); err != nil {
		s.printf("%s\n", clickProblem(err))
		return
	}
	s.printf("Marked checked: call %d (%s) of request %s.\n", n.Number, oneLine(n.Tool), short(batchID))
}
