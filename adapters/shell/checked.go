package shell

import (
	"context"
	"fmt"

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
