package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/confirm"
)

// Events API envelope types.
const (
	envelopeURLVerification = "url_verification"
	envelopeEventCallback   = "event_callback"
)

// eventRequest is a parsed Events API body (HTTP) or events_api payload
// (Socket Mode).
type eventRequest struct {
	Type      string
	Challenge string // url_verification only
	TeamID    string
	EventID   string
	Event     messageEvent
}

// eventEnvelope is the wire shape. Token is Slack's deprecated
// verification token: it is decoded only to say it is ignored; the
// signing secret (or the Socket Mode connection) is what is trusted.
type eventEnvelope struct {
	Token     string          `json:"token"` // ignored
	Type      string          `json:"type"`
	Challenge string          `json:"challenge"`
	TeamID    string          `json:"team_id"`
	EventID   string          `json:"event_id"`
	Event     json.RawMessage `json:"event"`
}

// messageEvent holds the fields of app_mention and message events the
// adapter uses.
type messageEvent struct {
	Type        string `json:"type"`
	Subtype     string `json:"subtype"`
	Channel     string `json:"channel"`
	ChannelType string `json:"channel_type"` // message events: im, channel, group, mpim
	User        string `json:"user"`
	BotID       string `json:"bot_id"`
	Text        string `json:"text"`
	TS          string `json:"ts"`
	ThreadTS    string `json:"thread_ts"`
	Hidden      bool   `json:"hidden"`
	Tab         string `json:"tab"` // app_home_opened: home or messages
}

// errBadEvent marks a body that is not a usable Events API request.
var errBadEvent = errors.New("bad Slack event")

func badEvent(format string, args ...any) error { return classed(errBadEvent, format, args...) }

// classed is an error of class (errors.Is) saying format with args.
func classed(class error, format string, args ...any) error {
	return fmt.Errorf("%w: %s", class, fmt.Sprintf(format, args...))
}

// parseEvent decodes an Events API body. It checks the shape only; what
// an event means is decided by classify.
func parseEvent(body []byte) (eventRequest, error) {
	var env eventEnvelope
	if err := json.Unmarshal(body, &env); err != nil {
		return eventRequest{}, badEvent("malformed JSON: %v", err)
	}
	req := eventRequest{Type: env.Type, TeamID: env.TeamID, EventID: env.EventID, Challenge: env.Challenge}
	switch env.Type {
	case envelopeURLVerification:
		if env.Challenge == "" {
			return eventRequest{}, badEvent("url_verification without a challenge")
		}
	case envelopeEventCallback:
		if env.EventID == "" {
			return eventRequest{}, badEvent("event_callback without an event_id")
		}
		if len(env.Event) == 0 || string(env.Event) == "null" {
			return eventRequest{}, badEvent("event_callback %s without an event", clip(env.EventID, 40))
		}
		if err := json.Unmarshal(env.Event, &req.Event); err != nil {
			return eventRequest{}, badEvent("event_callback %s: malformed event: %v", clip(env.EventID, 40), err)
		}
		if req.Event.Type == "" {
			return eventRequest{}, badEvent("event_callback %s: event without a type", clip(env.EventID, 40))
		}
	case "":
		return eventRequest{}, badEvent("no type")
	default:
		// app_rate_limited and other envelope types: acknowledged, ignored.
	}
	return req, nil
}

// actionKind is what an event asks of the bot.
type actionKind int

const (
	actIgnore actionKind = iota
	actTurn              // a turn: mention, or any DM message
	actNote              // an aside in a thread: kept as context if the thread holds a conversation
	actHome              // a person opened Airlock's Home tab: publish their home view
)

// eventAction is what to do with an event.
type eventAction struct {
	Kind    actionKind
	Turn    bot.Turn
	EventID string
	Why     string // for ignored events, in the debug log
}

// Message subtypes carrying a person's words; every other subtype
// (message_changed, message_deleted, bot_message, channel_join, …) is
// ignored.
var personSubtypes = map[string]bool{"": true, "thread_broadcast": true, "file_share": true}

// classify decides what an event is: a turn, an aside, or nothing. It
// fails on a mention or message missing the fields it needs.
func classify(req eventRequest, self identity) (eventAction, error) {
	if req.Type != envelopeEventCallback {
		return eventAction{Kind: actIgnore, Why: "envelope " + req.Type}, nil
	}
	e := req.Event
	ignore := func(why string) (eventAction, error) {
		return eventAction{Kind: actIgnore, Why: why, EventID: req.EventID}, nil
	}
	if e.Type == "app_home_opened" {
		if e.Tab != "home" || !userIDPattern.MatchString(e.User) {
			return ignore("app_home_opened: not the Home tab, or no user")
		}
		return eventAction{Kind: actHome, EventID: req.EventID, Turn: bot.Turn{Platform: Platform, User: e.User}}, nil
	}
	if e.Type != "app_mention" && e.Type != "message" {
		return ignore("event type " + e.Type)
	}
	switch {
	case !personSubtypes[e.Subtype]:
		return ignore("subtype " + e.Subtype)
	case e.Hidden:
		return ignore("hidden message")
	case e.BotID != "":
		return ignore("from a bot")
	case e.User == "":
		return ignore("no user")
	case self.UserID != "" && e.User == self.UserID:
		return ignore("from the bot itself")
	}
	if !channelIDPattern.MatchString(e.Channel) {
		return eventAction{}, badEvent("%s %s: missing or malformed channel", e.Type, clip(req.EventID, 40))
	}
	if !tsPattern.MatchString(e.TS) {
		return eventAction{}, badEvent("%s %s: missing or malformed ts", e.Type, clip(req.EventID, 40))
	}
	if e.ThreadTS != "" && !tsPattern.MatchString(e.ThreadTS) {
		return eventAction{}, badEvent("%s %s: malformed thread_ts", e.Type, clip(req.EventID, 40))
	}
	// A group DM (mpim) is a direct message: served by the `id: dm`
	// entry, not by channel entries or "*".
	turn := bot.Turn{Platform: Platform, Channel: e.Channel, User: e.User, Text: stripMention(e.Text, self.UserID),
		DM: e.ChannelType == "im" || e.ChannelType == "mpim" || strings.HasPrefix(e.Channel, "D")}
	act := eventAction{Kind: actTurn, EventID: req.EventID}
	// mentionThread is the thread of a mention: its thread_ts when it is
	// a reply, else its own ts.
	mentionThread := e.ThreadTS
	if mentionThread == "" {
		mentionThread = e.TS
	}
	switch {
	case e.Type == "app_mention":
		if !mentionByAppMention(e.Channel) {
			return ignore("app_mention in a G or D conversation: taken from its message event, which says whether it is a group DM")
		}
		turn.Thread = mentionThread
	case e.ChannelType == "im":
		// Every DM message is a turn: in its thread, or in the DM's one
		// running conversation ("") when not in a thread.
		turn.Thread = e.ThreadTS
	case e.ChannelType == "channel" || e.ChannelType == "group" || e.ChannelType == "mpim":
		if mentions(e.Text, self.UserID) {
			if mentionByAppMention(e.Channel) {
				return ignore("mention: handled by its app_mention event")
			}
			// A group DM, or a private channel with a G id: this message
			// event is the mention (its app_mention twin is ignored).
			turn.Thread = mentionThread
			break
		}
		if e.ThreadTS == "" {
			return ignore("not in a thread")
		}
		turn.Thread = e.ThreadTS
		turn.Text = strings.TrimSpace(e.Text)
		act.Kind = actNote
	default:
		return ignore("channel type " + e.ChannelType)
	}
	act.Turn = turn
	return act, nil
}

// mentionByAppMention reports whether a mention in this conversation is
// taken from its app_mention event. app_mention carries no channel_type,
// and an id starting with G is either a private channel made before 2021
// or a group DM, which Airlock serves as a DM: there the mention is taken
// from its message.groups or message.mpim twin, which says which. (D, a
// DM, gets no app_mention; its messages come as message.im.) One source
// per conversation, so one message is never two turns.
func mentionByAppMention(channel string) bool {
	return !strings.HasPrefix(channel, "G") && !strings.HasPrefix(channel, "D")
}

var mentionPattern = regexp.MustCompile(`<@([A-Z0-9]+)(\|[^>]*)?>`)

// stripMention removes the bot's own mentions from text.
func stripMention(text, botUser string) string {
	if botUser != "" {
		text = mentionPattern.ReplaceAllStringFunc(text, func(m string) string {
			if mentionPattern.FindStringSubmatch(m)[1] == botUser {
				return ""
			}
			return m
		})
	}
	return strings.Join(strings.Fields(text), " ")
}

// mentions reports whether text mentions the bot.
func mentions(text, botUser string) bool {
	if botUser == "" {
		return false
	}
	for _, m := range mentionPattern.FindAllStringSubmatch(text, -1) {
		if m[1] == botUser {
			return true
		}
	}
	return false
}

// emptyMentionHint answers a mention without words.
const emptyMentionHint = "Hi! Mention me with what you need, for example: “@Airlock what is the status of the api service?”"

// handleEvent works a classified event: it drops retried deliveries by
// event id (the inbox did, for an event recorded there), then runs the
// turn or keeps the aside.
func (a *Adapter) handleEvent(ctx context.Context, act eventAction, retry int) {
	if act.Kind == actHome {
		a.homeOpened(ctx, act.Turn.User) // idempotent: no dedup needed
		return
	}
	th := bot.Thread{Platform: Platform, Channel: act.Turn.Channel, Thread: act.Turn.Thread}
	log := a.log.With("event", act.EventID, "channel", th.Channel, "thread", th.Thread, "user", act.Turn.User)
	if act.Kind == actNote {
		has, err := a.bot.HasConversation(ctx, th)
		if err != nil {
			log.Error("slack: look up conversation for an aside", "err", err)
			return
		}
		if !has {
			return // chatter in a thread the bot is not part of
		}
	}
	if act.Turn.Inbox == "" {
		first, err := a.store.MarkEvent(ctx, Platform, act.EventID)
		if err != nil {
			// Without the record a retry could start a second turn: drop it,
			// telling a person who may ask that it was not taken.
			log.Error("slack: record event id; event dropped", "err", err)
			if errors.Is(err, confirm.ErrUnavailable) {
				a.notRecorded(ctx, act)
			}
			return
		}
		if !first {
			log.Info("slack: retried event already handled; ignored", "retry", retry)
			return
		}
	}
	switch act.Kind {
	case actNote:
		if err := a.bot.Note(ctx, act.Turn); err != nil {
			log.Error("slack: keep aside", "err", err)
		}
	case actTurn:
		// A mention without words gets a hint, where the author may ask;
		// the bot answers everything else about who may ask.
		if act.Turn.Text == "" && a.bot.Admit(ctx, act.Turn) == bot.Admitted {
			if err := a.Post(ctx, th, emptyMentionHint); err != nil {
				log.Error("slack: post hint", "err", err)
			}
			return
		}
		log.Info("slack: turn")
		if err := a.bot.HandleTurn(ctx, act.Turn); err != nil {
			log.Error("slack: turn failed", "err", err)
			if perr := a.Post(ctx, th, bot.TurnFailedMessage(err)); perr != nil {
				log.Error("slack: post failure notice", "err", perr)
			}
		}
	}
}
