package slack

import (
	"context"
	"errors"
	"fmt"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/internal/ids"
)

// Every interaction and every event asking for a turn (a mention, a DM)
// is recorded in the bot's inbox before it is acknowledged
// (see bot's inbox): a process killed after the acknowledgement loses
// nothing, the inbox job of a live process (this one restarted, or a
// replica) works it through Replay. What could not be recorded is not
// acknowledged as taken.

// Kinds of the deliveries the adapter records (confirm.InboxItem.Kind).
const (
	deliveryInteraction = "interaction" // an interactivity payload, as its JSON
	deliveryEvent       = "event"       // an Events API callback, as its JSON body
)

// lastRetry is the X-Slack-Retry-Num of Slack's last try of an event
// (it retries three times, over about five minutes): an event that
// could not be recorded is answered 503 before it, so Slack sends it
// again, and acknowledged then, with a word in its thread.
const lastRetry = 3

// notRecordedClick answers, privately, a click that could not be
// recorded (it was answered 503 too: Slack shows the click failed).
var notRecordedClick = bot.UserMessage(confirm.ErrUnavailable)

var _ bot.Replayer = (*Adapter)(nil)

// record records a delivery in the inbox before it is acknowledged. It
// returns the delivery (nil without an inbox: the bot has none) and
// whether it was recorded now (false: Slack's retry of one recorded
// already, to acknowledge and do nothing with). An error: it was not
// recorded; do not acknowledge it as taken.
func (a *Adapter) record(kind, key string, payload []byte) (*confirm.InboxItem, bool, error) {
	if a.inbox == nil {
		return nil, true, nil
	}
	it, first, err := a.seal.Record(a.context(), a.inbox, confirm.InboxItem{Platform: Platform, Key: key, Kind: kind, Payload: payload})
	if err != nil {
		return nil, false, fmt.Errorf("slack: %w", err)
	}
	return it, first, nil
}

// recordEvent records an event that asks for a turn (a mention, a DM)
// as record does. An aside in a thread is not recorded (nil, true): it is
// context only, and a thread's chatter the bot is not part of would cost
// a write each; it is de-duplicated by its event id as before.
func (a *Adapter) recordEvent(act eventAction, eventID string, payload []byte) (*confirm.InboxItem, bool, error) {
	if act.Kind != actTurn {
		return nil, true, nil
	}
	return a.record(deliveryEvent, eventKey(eventID), payload)
}

// interactionKey is the inbox key of an interaction: Slack does not send
// an interaction again, so each delivery is its own.
func interactionKey() string { return "interaction:" + ids.New() }

// eventKey is the inbox key of an event: its event id, the same in
// Slack's retries.
func eventKey(eventID string) string { return "event:" + eventID }

// finish marks a recorded delivery done (nil: none).
func (a *Adapter) finish(it *confirm.InboxItem) {
	if it != nil && a.inbox != nil {
		a.inbox.Finished(a.context(), it.Platform, it.Key)
	}
}

// Replay implements bot.Replayer: it works again a delivery the process
// that recorded it did not finish, through the path it took then. A
// click already counted changes nothing (bot.Click.Replayed), a turn
// already stored asks the model only when it was not answered.
func (a *Adapter) Replay(_ context.Context, it confirm.InboxItem) error {
	if a.identity().UserID == "" {
		return bot.ErrNotReady
	}
	return a.seal.Replay(it, map[string]func(*confirm.InboxItem) error{deliveryInteraction: a.replayInteraction, deliveryEvent: a.replayEvent})
}

// replayInteraction works a recorded interaction again.
func (a *Adapter) replayInteraction(it *confirm.InboxItem) error {
	in, err := parseInteraction(it.Payload)
	if err != nil {
		return err
	}
	in.Replayed, in.delivery = true, it
	a.spawn("replayed interaction", func(ctx context.Context) {
		defer a.finish(it)
		a.interact(ctx, in)
	})
	return nil
}

// replayEvent works a recorded event again: a turn already stored asks
// the model only when it was not answered.
func (a *Adapter) replayEvent(it *confirm.InboxItem) error {
	ev, err := parseEvent(it.Payload)
	if err != nil {
		return err
	}
	act, err := classify(ev, a.identity())
	if err != nil {
		return err
	}
	if act.Kind == actIgnore {
		return errors.New("the event asks nothing: " + act.Why)
	}
	act.Turn.Inbox, act.Turn.Replayed = it.Key, true
	a.spawn("replayed event "+ev.EventID, func(ctx context.Context) {
		defer a.finish(it)
		a.handleEvent(ctx, act, 0)
	})
	return nil
}

// notRecorded answers an event that could not be recorded on Slack's
// last try: a turn's author is told in its thread that nothing was done
// (where they may ask), as when the database is away for the turn.
func (a *Adapter) notRecorded(ctx context.Context, act eventAction) {
	th := bot.Thread{Platform: Platform, Channel: act.Turn.Channel, Thread: act.Turn.Thread}
	if act.Kind == actTurn && a.bot.Admit(ctx, act.Turn) == bot.Admitted {
		if err := a.Post(ctx, th, bot.DatabaseDownMessage); err != nil {
			a.log.Error("slack: post failure notice", "err", err)
		}
	}
}
