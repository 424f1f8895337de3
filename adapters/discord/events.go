package discord

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/confirm"
)

// chanInfo is what the adapter keeps of a channel.
type chanInfo struct {
	guild  string
	parent string
	typ    discordgo.ChannelType
}

func (c chanInfo) isThread() bool {
	switch c.typ {
	case discordgo.ChannelTypeGuildPublicThread, discordgo.ChannelTypeGuildPrivateThread, discordgo.ChannelTypeGuildNewsThread:
		return true
	}
	return false
}

// maxCachedChannels bounds the channel cache; past it the cache starts over.
const maxCachedChannels = 50000

// channelCache maps channel ids to their guild, parent and type, from
// gateway events and REST lookups. The zero value is ready.
type channelCache struct {
	mu sync.Mutex
	m  map[string]chanInfo
}

func (c *channelCache) put(ch *discordgo.Channel, guild string) {
	if ch == nil || ch.ID == "" {
		return
	}
	info := chanInfo{guild: ch.GuildID, parent: ch.ParentID, typ: ch.Type}
	if info.guild == "" {
		info.guild = guild
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCachedChannels {
		c.m = map[string]chanInfo{}
	}
	c.m[ch.ID] = info
}

func (c *channelCache) get(id string) (chanInfo, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	info, ok := c.m[id]
	return info, ok
}

// channel returns what is known of a channel, asking REST
// (GET /channels/{id}) when it is not cached.
func (a *Adapter) channel(ctx context.Context, id string) (chanInfo, error) {
	if info, ok := a.channels.get(id); ok {
		return info, nil
	}
	ch, err := a.s.Channel(id, discordgo.WithContext(ctx))
	if err != nil {
		return chanInfo{}, fmt.Errorf("discord: look up channel %s: %w", id, err)
	}
	a.channels.put(ch, "")
	info, _ := a.channels.get(id)
	return info, nil
}

func (a *Adapter) onReady(_ *discordgo.Session, r *discordgo.Ready) {
	if r.User != nil && r.User.ID != "" {
		id, name := r.User.ID, r.User.Username
		a.botID.Store(&id)
		// discordgo runs handlers concurrently: a GUILD_CREATE may have
		// been handled before the bot's name was known. Its managed roles
		// wait in managedRoles and are matched now, under the same lock.
		a.mu.Lock()
		a.botName.Store(&name)
		for guild, roles := range a.managedRoles {
			for _, r := range roles {
				if r.Name == name {
					a.botRoles[guild] = r.ID
				}
			}
		}
		a.managedRoles = nil
		a.mu.Unlock()
	}
	for _, g := range r.Guilds {
		a.noteGuild(g)
	}
}

func (a *Adapter) onGuildCreate(_ *discordgo.Session, g *discordgo.GuildCreate) { a.noteGuild(g.Guild) }

func (a *Adapter) noteGuild(g *discordgo.Guild) {
	if g == nil {
		return
	}
	for _, ch := range g.Channels {
		a.channels.put(ch, g.ID)
	}
	for _, ch := range g.Threads {
		a.channels.put(ch, g.ID)
	}
	// A bot gets a managed role named after it; people often pick that
	// role in the mention list, so a mention of it counts as the bot's.
	a.mu.Lock()
	defer a.mu.Unlock()
	var name string
	if p := a.botName.Load(); p != nil {
		name = *p
	}
	for _, r := range g.Roles {
		if r == nil || !r.Managed {
			continue
		}
		switch {
		case name == "": // READY not handled yet: onReady matches it
			if a.managedRoles == nil {
				a.managedRoles = map[string][]*discordgo.Role{}
			}
			a.managedRoles[g.ID] = append(a.managedRoles[g.ID], r)
		case r.Name == name:
			a.botRoles[g.ID] = r.ID
		}
	}
}

func (a *Adapter) onChannelCreate(_ *discordgo.Session, c *discordgo.ChannelCreate) {
	a.channels.put(c.Channel, "")
}

func (a *Adapter) onChannelUpdate(_ *discordgo.Session, c *discordgo.ChannelUpdate) {
	a.channels.put(c.Channel, "")
}

func (a *Adapter) onThreadCreate(_ *discordgo.Session, c *discordgo.ThreadCreate) {
	a.channels.put(c.Channel, "")
}

func (a *Adapter) onThreadUpdate(_ *discordgo.Session, c *discordgo.ThreadUpdate) {
	a.channels.put(c.Channel, "")
}

// onMessageCreate runs in the gateway reader: it filters and queues the
// message behind the earlier ones of its channel.
func (a *Adapter) onMessageCreate(_ *discordgo.Session, mc *discordgo.MessageCreate) {
	m := mc.Message
	if m == nil || m.Author == nil {
		return
	}
	if m.Author.Bot || m.Author.System || m.WebhookID != "" || m.Author.ID == a.userID() {
		return // other bots, webhooks and the bot itself (its own posts come back)
	}
	if m.Type != discordgo.MessageTypeDefault && m.Type != discordgo.MessageTypeReply {
		return // system messages: thread created, pins, joins...
	}
	if !a.seen.add("message:" + m.ID) {
		return // a redelivery
	}
	rec := a.recordMessage(m)
	a.enqueue(m.ChannelID, func(ctx context.Context) { a.handleMessage(ctx, m, rec) })
}

// handleMessage works a message; rec is its inbox record when it was
// recorded (see recordMessage), waited for here.
func (a *Adapter) handleMessage(ctx context.Context, m *discordgo.Message, rec *pendingRecord) {
	var d *confirm.InboxItem
	if rec != nil {
		<-rec.done
		switch {
		case rec.err != nil:
			a.log.Warn("discord: message not recorded; worked without its record", "message", m.ID, "err", rec.err)
		case !rec.first:
			return // recorded already: another replica has it
		default:
			d = rec.it
		}
	}
	handedOff := false // the turn was queued, and marks d done
	defer func() {
		if !handedOff {
			a.finish(d)
		}
	}()
	if d == nil && a.cfg.Events != nil {
		first, err := a.cfg.Events.MarkEvent(ctx, Platform, "message:"+m.ID)
		if err != nil {
			a.log.Error("discord: record message event", "message", m.ID, "err", err)
		} else if !first {
			return
		}
	}
	botID := a.userID()
	addressed := a.mentionsBot(m, botID) ||
		(m.ReferencedMessage != nil && m.ReferencedMessage.Author != nil && botID != "" && m.ReferencedMessage.Author.ID == botID)
	turn := bot.Turn{Platform: Platform, User: m.Author.ID, Text: a.stripBotMention(m.Content, m.GuildID, botID), DM: m.GuildID == ""}
	if m.Member != nil {
		turn.Roles = m.Member.Roles
	}
	if d != nil {
		turn.Inbox, turn.Replayed = d.Key, replayed(ctx) != nil
	}

	if turn.DM { // a direct message: every message is a turn
		turn.Channel = m.ChannelID
		a.turn(ctx, turn, m.ChannelID)
		return
	}
	info, err := a.channel(ctx, m.ChannelID)
	if err != nil {
		a.log.Error("discord: message in an unknown channel", "channel", m.ChannelID, "err", err)
		return
	}
	if info.isThread() {
		turn.Channel, turn.Thread = info.parent, m.ChannelID
		if addressed {
			a.turn(ctx, turn, m.ChannelID)
			return
		}
		th := bot.Thread{Platform: Platform, Channel: info.parent, Thread: m.ChannelID}
		has, err := a.b.HasConversation(ctx, th)
		if err != nil {
			a.log.Error("discord: look up conversation", "thread", m.ChannelID, "err", err)
			return
		}
		if has && strings.TrimSpace(m.Content) != "" {
			turn.Text = m.Content
			if err := a.b.Note(ctx, turn); err != nil {
				a.log.Error("discord: keep aside", "thread", m.ChannelID, "err", err)
			}
		}
		return
	}
	if !a.mentionsBot(m, botID) {
		return
	}
	if info.typ != discordgo.ChannelTypeGuildText && info.typ != discordgo.ChannelTypeGuildNews {
		a.log.Debug("discord: mention outside a text channel ignored", "channel", m.ChannelID, "type", info.typ)
		return
	}
	// Whether the author may talk to the bot here is settled before a
	// thread is started for them.
	turn.Channel = m.ChannelID
	switch a.b.Admit(ctx, turn) {
	case bot.NotServed:
		a.log.Info("discord: mention in a channel not served", "channel", m.ChannelID, "user", m.Author.ID)
		a.replyNotServed(ctx, m)
		return
	case bot.NotRequester:
		a.log.Info("discord: mention by someone who may not ask here; ignored", "channel", m.ChannelID, "user", m.Author.ID)
		return
	}
	th, err := a.s.MessageThreadStartComplex(m.ChannelID, m.ID, &discordgo.ThreadStart{
		Name:                threadName(turn.Text),
		AutoArchiveDuration: ThreadAutoArchive,
	}, discordgo.WithContext(ctx))
	if err != nil && turn.Replayed && threadExists(err) {
		// Worked again after its thread was started: a thread started
		// from a message has the message's id.
		th, err = &discordgo.Channel{ID: m.ID, ParentID: m.ChannelID, GuildID: m.GuildID, Type: discordgo.ChannelTypeGuildPublicThread}, nil
	}
	if err != nil {
		a.log.Error("discord: start a thread (does the bot have Create Public Threads here?)", "channel", m.ChannelID, "message", m.ID, "err", err)
		return
	}
	if th.ParentID == "" {
		th.ParentID = m.ChannelID
	}
	if th.Type == 0 {
		th.Type = discordgo.ChannelTypeGuildPublicThread
	}
	a.channels.put(th, m.GuildID)
	turn.Channel, turn.Thread = m.ChannelID, th.ID
	// The turn runs in the thread's queue: the parent channel stays free
	// for the next mention.
	handedOff = true
	a.enqueue(th.ID, func(ctx context.Context) {
		defer a.finish(d)
		a.turn(ctx, turn, th.ID)
	})
}

// replyNotServed answers a mention in a channel the bot does not serve:
// a reply to the message, in the channel, pinging nobody.
func (a *Adapter) replyNotServed(ctx context.Context, m *discordgo.Message) {
	fail := false
	_, err := a.s.ChannelMessageSendComplex(m.ChannelID, &discordgo.MessageSend{
		Content:         bot.NotServedMessage,
		Reference:       &discordgo.MessageReference{MessageID: m.ID, ChannelID: m.ChannelID, GuildID: m.GuildID, FailIfNotExists: &fail},
		AllowedMentions: noMentions(),
	}, discordgo.WithContext(ctx))
	if err != nil {
		a.log.Error("discord: answer a mention in a channel not served", "channel", m.ChannelID, "err", err)
	}
}

func (a *Adapter) turn(ctx context.Context, t bot.Turn, where string) {
	if strings.TrimSpace(t.Text) == "" {
		t.Text = "(mentioned you without a message)"
	}
	if err := a.b.HandleTurn(ctx, t); err != nil {
		a.log.Error("discord: turn failed", "channel", t.Channel, "thread", t.Thread, "err", err)
		if ctx.Err() != nil {
			return
		}
		if _, perr := a.s.ChannelMessageSendComplex(where, &discordgo.MessageSend{
			Content:         bot.TurnFailedMessage(err),
			AllowedMentions: noMentions(),
		}, discordgo.WithContext(ctx)); perr != nil {
			a.log.Error("discord: post failure notice", "err", perr)
		}
	}
}

func (a *Adapter) mentionsBot(m *discordgo.Message, botID string) bool {
	if botID == "" {
		return false
	}
	for _, u := range m.Mentions {
		if u != nil && u.ID == botID {
			return true
		}
	}
	if strings.Contains(m.Content, "<@"+botID+">") || strings.Contains(m.Content, "<@!"+botID+">") {
		return true
	}
	a.mu.Lock()
	role := a.botRoles[m.GuildID]
	a.mu.Unlock()
	return role != "" && slices.Contains(m.MentionRoles, role)
}

func (a *Adapter) stripBotMention(text, guild, botID string) string {
	if botID != "" {
		text = strings.ReplaceAll(text, "<@"+botID+">", "")
		text = strings.ReplaceAll(text, "<@!"+botID+">", "")
	}
	a.mu.Lock()
	role := a.botRoles[guild]
	a.mu.Unlock()
	if role != "" {
		text = strings.ReplaceAll(text, "<@&"+role+">", "")
	}
	return strings.TrimSpace(text)
}

var mentionRE = regexp.MustCompile(`<(?:@[!&]?|#)\d+>`)

// threadName derives a thread name (1 to 100 characters) from a message.
func threadName(text string) string {
	text = mentionRE.ReplaceAllString(text, "")
	for _, line := range strings.Split(text, "\n") {
		if line = strings.Join(strings.Fields(line), " "); line != "" {
			return truncate(line, 100)
		}
	}
	return "Airlock"
}

// onInteractionCreate runs in the gateway reader: it hands the
// interaction to a goroutine that answers it at once.
func (a *Adapter) onInteractionCreate(_ *discordgo.Session, ic *discordgo.InteractionCreate) {
	i := ic.Interaction
	if i == nil || !a.seen.add("interaction:"+i.ID) {
		return
	}
	received := time.Now()
	if !a.spawn(func(ctx context.Context) { a.handleInteraction(context.WithValue(ctx, receivedKey{}, received), i) }) {
		a.log.Warn("discord: shutting down; interaction dropped", "interaction", i.ID)
	}
}

// receivedKey carries, in an interaction's context, when it was received.
type receivedKey struct{}

// respond sends the interaction's response, which acknowledges it, and
// records how long after receiving it that was (Config.Metrics).
func (a *Adapter) respond(ctx context.Context, i *discordgo.Interaction, r *discordgo.InteractionResponse) error {
	err := a.s.InteractionRespond(i, r, discordgo.WithContext(ctx))
	if received, ok := ctx.Value(receivedKey{}).(time.Time); ok && err == nil && a.cfg.Metrics != nil {
		a.cfg.Metrics.Ack(Platform, time.Since(received))
	}
	return err
}

// deferUpdate acknowledges a click within Discord's 3 seconds without
// changing the message (the card is edited once the click is decided).
func (a *Adapter) deferUpdate(ctx context.Context, i *discordgo.Interaction) bool {
	err := a.respond(ctx, i, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredMessageUpdate})
	if err != nil {
		a.log.Error("discord: acknowledge interaction", "interaction", i.ID, "err", err)
		return false
	}
	return true
}

func (a *Adapter) respondEphemeral(ctx context.Context, i *discordgo.Interaction, text string) {
	err := a.respond(ctx, i, &discordgo.InteractionResponse{
		Type: discordgo.InteractionResponseChannelMessageWithSource,
		Data: &discordgo.InteractionResponseData{
			Content:         text,
			Flags:           discordgo.MessageFlagsEphemeral,
			AllowedMentions: noMentions(),
		},
	})
	if err != nil {
		a.log.Error("discord: answer interaction", "interaction", i.ID, "err", err)
	}
}

// followUp sends an ephemeral message to the clicker after the deferral.
func (a *Adapter) followUp(ctx context.Context, i *discordgo.Interaction, text string) {
	_, err := a.s.FollowupMessageCreate(i, false, &discordgo.WebhookParams{
		Content:         text,
		Flags:           discordgo.MessageFlagsEphemeral,
		AllowedMentions: noMentions(),
	}, discordgo.WithContext(ctx))
	if err != nil {
		a.log.Error("discord: ephemeral follow-up", "interaction", i.ID, "err", err)
	}
}
