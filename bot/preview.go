package bot

import (
	"context"
	"errors"
	"fmt"

	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/tools"
)

var (
	// ErrPreviewRunning: an Allow on a call whose preview has not ended;
	// a yes counts only for what its giver saw.
	ErrPreviewRunning = errors.New("the call's preview is still running")
	// ErrStalePreview is ErrStaleRevision for a card rendered before the
	// call's preview ended.
	ErrStalePreview = fmt.Errorf("%w: the preview arrived since", ErrStaleRevision)
)

// previewRefusals are the preview's click refusals with what the clicker
// is told (see refusals).
var previewRefusals = []struct {
	err error
	msg string
}{
	{ErrPreviewRunning, "This call's preview is still running: wait for it to show on the card, then decide. You can deny it now."},
	{ErrStalePreview, "The call's preview arrived since you looked — see the updated card."},
	{ErrPreviewNotEditable, "This call has a preview of its arguments, so they can't be edited here: deny it and ask again with the arguments you want."},
}

func init() {
	refusals = append(previewRefusals, refusals...)
}

// previewer is the call's tool's preview, when it has one.
func (b *Bot) previewer(name string) (tools.Previewer, bool) {
	t, ok := b.cfg.Tools.Get(name)
	if !ok {
		return nil, false
	}
	return tools.PreviewOf(t)
}

// markPreview sets a call that waits for a person's yes to "preview
// running" when its tool has a preview; it runs once the batch is stored
// (startPreviews).
func (b *Bot) markPreview(c *confirm.Call) {
	if c.Decision != confirm.DecisionPending {
		return
	}
	if _, ok := b.previewer(c.Tool); ok {
		c.Preview.State = confirm.PreviewRunning
	}
}

// startPreviews runs the previews of a stored batch's calls marked
// running, each in the background; the card (posted at once, saying
// "preview running…") is updated as each ends.
func (b *Bot) startPreviews(ctx context.Context, conv confirm.Conversation, batch *confirm.Batch) {
	for _, c := range batch.Calls {
		if c.Preview.State != confirm.PreviewRunning || c.Decision != confirm.DecisionPending {
			continue
		}
		if !b.enter() {
			return // stopping: recovery runs it again
		}
		go func() {
			defer b.leave()
			b.runPreview(context.WithoutCancel(ctx), conv, c)
		}()
	}
}

// runPreview runs one call's preview (bounded by its own timeout),
// records its scrubbed output and hash (or its scrubbed error) and
// updates the card. A landing makes the call's next revision: a click on
// the card as it was before changes nothing.
func (b *Bot) runPreview(ctx context.Context, conv confirm.Conversation, c confirm.Call) {
	state, output, hash, size := confirm.PreviewFailed, "", "", int64(0)
	if pv, ok := b.previewer(c.Tool); !ok {
		output = "the tool has no preview any more"
	} else if args, err := b.toolArgs(ctx, c, c.RunArgs()); err != nil {
		output = b.scrub(err.Error())
	} else if out, err := pv.Preview(ctx, args); err != nil {
		output = b.scrub(err.Error())
	} else {
		// The hash binds the whole scrubbed output; its start is kept.
		whole := b.scrub(out)
		state, hash, size = confirm.PreviewDone, confirm.PreviewHash(whole), int64(len(whole))
		output = confirm.KeepPreview(whole, confirm.MaxPreviewKept)
	}
	ok, err := b.store.FinishPreview(ctx, c.BatchID, c.Key, state, output, hash, size)
	if err != nil {
		b.log.Error("record preview", "batch", c.BatchID, "call", c.Key, "err", err)
		return
	}
	if !ok {
		return // another worker's preview landed first
	}
	b.log.Info("preview ended", "batch", c.BatchID, "call", c.Key, "state", string(state))
	b.refreshCard(ctx, conv, c.BatchID)
}

// recoverPreviews runs again the previews a restart cut off, of calls
// still waiting on platforms this process serves.
func (b *Bot) recoverPreviews(ctx context.Context) error {
	keys, err := b.store.RunningPreviews(ctx)
	if err != nil {
		return err
	}
	for _, k := range keys {
		batch, conv, p, err := b.served(ctx, k.BatchID)
		if err != nil || p == nil {
			continue
		}
		for _, c := range batch.Calls {
			if c.Key == k.Key && c.Preview.State == confirm.PreviewRunning && c.Decision == confirm.DecisionPending {
				b.log.Warn("running again a preview a restart cut off", "batch", c.BatchID, "call", c.Key)
				b.runPreview(ctx, conv, c)
			}
		}
	}
	return nil
}

// recheck runs the preview of an allowed call again just before its tool
// (recheck: true) and returns why the tool must not run ("": it may): the
// output is not the one the approver saw (the hashes of the whole
// scrubbed outputs differ, wherever the change is), the recheck failed,
// or no preview was shown when the call was allowed. The outcome is
// recorded.
func (b *Bot) recheck(ctx context.Context, c confirm.Call) string {
	pv, ok := b.previewer(c.Tool)
	if !ok {
		return ""
	}
	if _, again := pv.Previews(); !again {
		return ""
	}
	record := func(state confirm.RecheckState, hash string) {
		if err := b.store.RecordRecheck(ctx, c.BatchID, c.Key, state, hash); err != nil {
			b.log.Error("record preview recheck", "batch", c.BatchID, "call", c.Key, "err", err)
		}
	}
	if c.Preview.State != confirm.PreviewDone {
		record(confirm.RecheckFailed, "")
		return confirm.PreviewRecheckFailedMessage("no preview was shown when it was approved")
	}
	args, err := b.toolArgs(ctx, c, c.RunArgs())
	var out string
	if err == nil {
		out, err = pv.Preview(ctx, args)
	}
	if err != nil {
		record(confirm.RecheckFailed, "")
		return confirm.PreviewRecheckFailedMessage(b.scrub(err.Error()))
	}
	now := confirm.PreviewHash(b.scrub(out))
	if now != c.Preview.Hash {
		b.log.Warn("preview changed since it was approved; not run", "batch", c.BatchID, "call", c.Key)
		record(confirm.RecheckChanged, now)
		return confirm.PreviewChangedMessage(c.Preview.Hash, now)
	}
	record(confirm.RecheckMatched, now)
	return ""
}

// ErrPreviewNotEditable: Edit… on a call with a preview, which shows the
// model's arguments.
var ErrPreviewNotEditable = fmt.Errorf("%w: it has a preview of its arguments", ErrNotEditable)
