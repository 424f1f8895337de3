package shell

import (
	"context"
	"fmt"
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
