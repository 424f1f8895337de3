package discord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/bwmarrin/discordgo"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/confirm"
)

// Every click and submitted form that is worked after its
// acknowledgement (a deferred response) is recorded in the bot's inbox
// before it is acknowledged, and every message addressed to the bot (a
// mention, a reply to it, a DM) when it arrives: a process killed after
// that loses nothing, the inbox job of a live process (this one restarted,
// or a replica) works it through Replay. A click that could not be
// recorded is answered, privately, that nothing was taken. The gateway
// sends every message to every replica: the inbox's key (the message's
// or the interaction's id) lets one work it.

// Kinds of the deliveries the adapter records (confirm.InboxItem.Kind).
const (
	deliveryInteraction = "interaction" // the interaction, as discordgo encodes it
	deliveryMessage     = "message"     // the message, as discordgo encodes it
)

// notRecordedClick answers a click that could not be recorded.
var notRecordedClick = bot.UserMessage(confirm.ErrUnavailable)

var _ bot.Replayer = (*Adapter)(nil)

// replayKey carries, in the context of work done again from the inbox,
// its inbox record.
type replayKey struct{}

// replayed is the inbox record of work done again from the inbox; nil
// for a delivery worked by the process that received it.
func replayed(ctx context.Context) *confirm.InboxItem {
	it, _ := ctx.Value(replayKey{}).(*confirm.InboxItem)
	return it
}

// record records a delivery in the inbox. It returns the delivery (nil
// without an inbox: the bot has none) and whether it was recorded now
// (false: recorded already, by another replica or before a redelivery).
// An error: it was not recorded.
func (a *Adapter) record(kind, key string, v any) (*confirm.InboxItem, bool, error) {
	if a.inbox == nil {
		return nil, true, nil
	}
	payload, err := json.Marshal(v)
	if err != nil {
		return nil, false, fmt.Errorf("discord: encode the delivery: %w", err)
	}
	it, first, err := a.seal.Record(context.Background(), a.inbox, confirm.InboxItem{Platform: Platform, Key: key, Kind: kind, Payload: payload})
	if err != nil {
		return nil, false, fmt.Errorf("discord: %w", err)
	}
	return it, first, nil
}

// finish marks a recorded delivery done (nil: none).
func (a *Adapter) finish(it *confirm.InboxItem) {
	if it != nil && a.inbox != nil {
		a.inbox.Finished(context.Background(), it.Platform, it.Key)
	}
}

// deferred acknowledges an interaction worked after its acknowledgement
// (a click that decides, a submitted form): recorded in the inbox first,
// acknowledged with a deferred response, worked, marked done. Worked again
// from the inbox, it is not recorded again; its acknowledgement went, or
// was lost, with the dead process: it is sent again, and failing to is no
// reason not to work it.
func (a *Adapter) deferred(ctx context.Context, i *discordgo.Interaction, work func(ctx context.Context)) {
	if it := replayed(ctx); it != nil {
		_ = a.s.InteractionRespond(i, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredMessageUpdate}, discordgo.WithContext(ctx))
		work(ctx)
		return
	}
	d, first, err := a.record(deliveryInteraction, "interaction:"+i.ID, storedOf(i))
	if err != nil {
		a.log.Warn("discord: interaction not recorded", "interaction", i.ID, "err", err)
		a.respondEphemeral(ctx, i, notRecordedClick)
		return
	}
	if !first {
		a.log.Info("discord: interaction recorded already (another replica has it); ignored", "interaction", i.ID)
		return
	}
	defer a.finish(d)
	if !a.deferUpdate(ctx, i) {
		return
	}
	work(ctx)
}

// pendingRecord is a message being recorded as it arrived; the work on it
// waits for the record (done).
type pendingRecord struct {
	done  chan struct{}
	it    *confirm.InboxItem
	first bool
	err   error
}

// recordMessage starts recording a message addressed to the bot; nil for
// any other (an aside is context only, and a channel's chatter would cost
// a write each), or without an inbox. It does not wait: the gateway's
// reader goes on.
func (a *Adapter) recordMessage(m *discordgo.Message) *pendingRecord {
	if a.inbox == nil {
		return nil
	}
	botID := a.userID()
	addressed := m.GuildID == "" || a.mentionsBot(m, botID) ||
		(m.ReferencedMessage != nil && m.ReferencedMessage.Author != nil && botID != "" && m.ReferencedMessage.Author.ID == botID)
	if !addressed {
		return nil
	}
	p := &pendingRecord{done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.it, p.first, p.err = a.record(deliveryMessage, "message:"+m.ID, m)
	}()
	return p
}

// Replay implements bot.Replayer: it works again a delivery the process
// that recorded it did not finish, through the path it took then.
func (a *Adapter) Replay(_ context.Context, it confirm.InboxItem) error {
	a.mu.Lock()
	ready := a.workCtx != nil && !a.stopping
	a.mu.Unlock()
	if !ready {
		return bot.ErrNotReady
	}
	return a.seal.Replay(it, map[string]func(*confirm.InboxItem) error{deliveryInteraction: a.replayInteraction, deliveryMessage: a.replayMessage})
}

// replayInteraction works a recorded interaction again.
func (a *Adapter) replayInteraction(it *confirm.InboxItem) error {
	i, err := decodeInteraction(it.Payload)
	if err != nil {
		return err
	}
	if !a.spawn(func(ctx context.Context) {
		defer a.finish(it)
		a.handleInteraction(context.WithValue(ctx, replayKey{}, it), i)
	}) {
		return bot.ErrNotReady
	}
	return nil
}

// replayMessage works a recorded message again, in its channel's turn.
func (a *Adapter) replayMessage(it *confirm.InboxItem) error {
	var m discordgo.Message
	if err := json.Unmarshal(it.Payload, &m); err != nil {
		return fmt.Errorf("decode the message: %w", err)
	}
	if m.ID == "" || m.ChannelID == "" || m.Author == nil {
		return errors.New("a message without its id, channel or author")
	}
	p := &pendingRecord{done: make(chan struct{}), it: it, first: true}
	close(p.done)
	a.enqueue(m.ChannelID, func(ctx context.Context) {
		a.handleMessage(context.WithValue(ctx, replayKey{}, it), &m, p)
	})
	return nil
}

// threadExists reports whether starting a thread failed because the
// message has one already (Discord's code 160004): a message worked again
// after its thread was started; the thread's id is the message's.
func threadExists(err error) bool {
	var re *discordgo.RESTError
	return errors.As(err, &re) && re.Response != nil && re.Response.StatusCode == http.StatusBadRequest &&
		re.Message != nil && re.Message.Code == 160004
}

// storedInteraction is an interaction as the inbox keeps it: discordgo
// encodes an interaction without a submitted form's inputs, kept beside
// it by their custom ids.
type storedInteraction struct {
	Interaction *discordgo.Interaction `json:"interaction"`
	Inputs      map[string]string      `json:"inputs,omitempty"`
}

func storedOf(i *discordgo.Interaction) storedInteraction {
	s := storedInteraction{Interaction: i}
	if data, ok := i.Data.(discordgo.ModalSubmitInteractionData); ok {
		s.Inputs = map[string]string{}
		for _, id := range []string{ReasonInputID, EditInputID, PhraseInputID} {
			if v := textInputValue(data.Components, id); v != "" {
				s.Inputs[id] = v
			}
		}
	}
	return s
}

// decodeInteraction is the interaction storedOf kept.
func decodeInteraction(payload []byte) (*discordgo.Interaction, error) {
	var s storedInteraction
	if err := json.Unmarshal(payload, &s); err != nil || s.Interaction == nil {
		return nil, fmt.Errorf("discord: decode the interaction: %v", err)
	}
	i := s.Interaction
	if data, ok := i.Data.(discordgo.ModalSubmitInteractionData); ok {
		row := &discordgo.ActionsRow{}
		for id, v := range s.Inputs {
			row.Components = append(row.Components, &discordgo.TextInput{CustomID: id, Value: v})
		}
		data.Components = []discordgo.MessageComponent{row}
		i.Data = data
	}
	return i, nil
}
