package bot

import (
	"context"
	"errors"
	"fmt"

	"github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/runbook"
)

// ErrNotRunButton: the click's action is no run message's button.
var ErrNotRunButton = errors.New("not a run message's button")

// RunAction works a click on a run message's button (card.Run.Actions):
// Stop run (the run's requester or an approver of its channel), Mark
// done and Retry on a halted run (approvers). The button carries the
// run's reference only: the run is looked up, and the click counts only
// in the run's channel, on the run's own message, by a person allowed to
// press it. A click that changes nothing (a stranger's, a forged or
// unknown reference, a second click on an ended run) returns an error for
// UserMessage.
func (b *Bot) RunAction(ctx context.Context, c Click, kind card.ActionKind) error {
	if !b.enter() {
		return ErrShuttingDown
	}
	defer b.leave()
	if c.IsBot {
		return ErrNotApprover
	}
	runID, err := confirm.ParseRunRef(c.Ref)
	if err != nil {
		return err
	}
	_, run, conv, err := b.runOf(ctx, runID)
	if errors.Is(err, runbook.ErrNoSuchRun) {
		return fmt.Errorf("run %q: %w", runID, confirm.ErrBadRef)
	}
	if err != nil {
		return err
	}
	if conv.Platform != c.Platform || conv.Channel != c.Channel {
		b.rejectClick(ctx, c, conv.ID, "", "", "run button in another channel")
		return ErrWrongChannel
	}
	if run.MessageRef == "" || c.Message != run.MessageRef {
		// The reference copied onto another message is no run's button.
		b.rejectClick(ctx, c, conv.ID, "", "", "run button not on the run's message")
		return fmt.Errorf("run %q on message %q: %w", runID, c.Message, confirm.ErrBadRef)
	}
	b.log.Info("run button", "run", runID, "user", c.User, "action", kind)
	switch kind {
	case card.ActRunStop:
		err = b.StopRunbook(ctx, runID, c.User, c.Roles)
	case card.ActRunMarkDone:
		err = b.MarkRunbookDone(ctx, runID, c.User, c.Roles)
	case card.ActRunRetry:
		err = b.RetryRunbook(ctx, runID, c.User, c.Roles)
	default:
		err = ErrNotRunButton
	}
	if errors.Is(err, ErrNotAllowedToStop) {
		b.rejectClick(ctx, c, conv.ID, "", "", "not the run's requester or an approver")
	}
	return err
}
