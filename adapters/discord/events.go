package discord

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/airlockhq/airlock/adapters/internal/visible"
	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/card"
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

// unknownButton is the answer to a custom id Airlock did not issue.
var unknownButton = bot.UserMessage(confirm.ErrBadRef)

func (a *Adapter) handleInteraction(ctx context.Context, i *discordgo.Interaction) {
	switch i.Type {
	case discordgo.InteractionMessageComponent:
		data, _ := i.Data.(discordgo.MessageComponentInteractionData)
		action, ref, ok := parseCustomID(data.CustomID)
		switch {
		case !ok || action == actionModal || action == actionEditSubmit:
			a.respondEphemeral(ctx, i, unknownButton)
		case action == actionShowArgs:
			a.showArgs(ctx, i, ref)
		case action == actionPreview:
			a.showPreview(ctx, i, ref)
		case action == actionReason:
			number := 0
			if _, pos, err := confirm.ParseRef(ref); err == nil {
				number = pos + 1
			}
			if err := a.respond(ctx, i, &discordgo.InteractionResponse{
				Type: discordgo.InteractionResponseModal,
				Data: ReasonModal(ref, number),
			}); err != nil {
				a.log.Error("discord: open the reason modal", "interaction", i.ID, "err", err)
			}
		case action == actionEdit:
			a.openEdit(ctx, i, ref)
		case action == actionAllowTyped:
			a.openPhrase(ctx, i, ref)
		case action == actionRevoke:
			a.deferred(ctx, i, func(ctx context.Context) { a.revoke(ctx, i, ref) })
		case action == actionExtend:
			a.deferred(ctx, i, func(ctx context.Context) { a.extend(ctx, i, ref) })
		case action == actionChecked:
			a.deferred(ctx, i, func(ctx context.Context) { a.checked(ctx, i, ref) })
		case action == actionAllowAll || action == actionDenyAll:
			a.deferred(ctx, i, func(ctx context.Context) { a.decideAll(ctx, i, ref, action == actionAllowAll) })
		case runActions[action] != 0:
			a.deferred(ctx, i, func(ctx context.Context) { a.runAction(ctx, i, ref, runActions[action]) })
		default: // Allow, "Allow for", Deny
			a.deferred(ctx, i, func(ctx context.Context) {
				a.decide(ctx, i, ref, action == actionAllow || action == actionGrant, action == actionGrant, "")
			})
		}
	case discordgo.InteractionModalSubmit:
		data, _ := i.Data.(discordgo.ModalSubmitInteractionData)
		action, ref, ok := parseCustomID(data.CustomID)
		if !ok || (action != actionModal && action != actionEditSubmit && action != actionPhraseSubmit) {
			a.respondEphemeral(ctx, i, unknownButton)
			return
		}
		a.deferred(ctx, i, func(ctx context.Context) {
			switch action {
			case actionEditSubmit:
				a.submitEdit(ctx, i, ref, textInputValue(data.Components, EditInputID))
			case actionPhraseSubmit:
				a.submitPhrase(ctx, i, ref, textInputValue(data.Components, PhraseInputID))
			default:
				a.decide(ctx, i, ref, false, false, textInputValue(data.Components, ReasonInputID))
			}
		})
	default:
		// Slash commands and the like: Airlock registers none.
		a.respondEphemeral(ctx, i, "I have no commands. Mention me in a channel to start a conversation.")
	}
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

// clickOf is the bot.Click of a component interaction or of a modal
// opened from a card's button, without its decision: the clicker (the
// member's user in a guild, the user in a DM), their roles, the
// conversation channel, and the message the button was on (Discord sends
// it with both; without it Message stays "" and the bot refuses the
// click). On failure the clicker has been told, ephemerally, in a
// follow-up: the interaction must have been acknowledged.
func (a *Adapter) clickOf(ctx context.Context, i *discordgo.Interaction, ref string) (bot.Click, bool) {
	c, answer, ok := a.clickFrom(ctx, i, ref)
	if !ok {
		a.followUp(ctx, i, answer)
	}
	return c, ok
}

// clickFrom is clickOf without answering: on failure it returns what to
// tell the clicker.
func (a *Adapter) clickFrom(ctx context.Context, i *discordgo.Interaction, ref string) (bot.Click, string, bool) {
	user := i.User
	var roles []string
	if i.Member != nil {
		roles = i.Member.Roles
		if i.Member.User != nil {
			user = i.Member.User
		}
	}
	if user == nil || user.ID == "" {
		return bot.Click{}, unknownButton, false
	}
	channel, err := a.clickChannel(ctx, i)
	if err != nil {
		a.log.Error("discord: click in an unknown channel", "channel", i.ChannelID, "err", err)
		return bot.Click{}, bot.UserMessage(err), false
	}
	message := ""
	if i.Message != nil {
		message = i.Message.ID
	}
	return bot.Click{
		Platform: Platform,
		Channel:  channel,
		Message:  message,
		User:     user.ID,
		Ref:      ref,
		Roles:    roles,
		IsBot:    user.Bot,
		Replayed: replayed(ctx) != nil,
	}, "", true
}

// decide maps the interaction to a bot.Click and decides it: Allow,
// "Allow for" (allow and grant) or Deny (with the modal's reason). A
// click that changes nothing is told why, ephemerally.
func (a *Adapter) decide(ctx context.Context, i *discordgo.Interaction, ref string, allow, grant bool, reason string) {
	click, ok := a.clickOf(ctx, i, ref)
	if !ok {
		return
	}
	click.Allow, click.Grant, click.Reason = allow, grant, reason
	a.refused(ctx, i, click, "decide", a.b.Decide(ctx, click))
}

// extend hands a card's Extend click to the bot.
func (a *Adapter) extend(ctx context.Context, i *discordgo.Interaction, ref string) {
	click, ok := a.clickOf(ctx, i, ref)
	if !ok {
		return
	}
	a.refused(ctx, i, click, "extend", a.b.Extend(ctx, click))
}

// decideAll works a card's Allow all or Deny all, answering privately
// what it decided and what it left waiting.
func (a *Adapter) decideAll(ctx context.Context, i *discordgo.Interaction, ref string, allow bool) {
	click, ok := a.clickOf(ctx, i, ref)
	if !ok {
		return
	}
	click.Allow = allow
	res, err := a.b.DecideAll(ctx, click)
	if err != nil {
		a.refused(ctx, i, click, "decide all", err)
		return
	}
	a.followUp(ctx, i, res.Message())
}

// editFormTimeout bounds the bot's EditForm: the modal must be the
// interaction's first response, within Discord's 3 seconds.
const editFormTimeout = 2500 * time.Millisecond

// tooLargeToEdit answers Edit… on a call whose arguments do not fit the
// modal's one text input.
func tooLargeToEdit(n int) string {
	return fmt.Sprintf("This call's arguments are too large to edit in Discord (%s; a form holds at most %s). Allow or deny it as it is. Nothing changed.",
		card.Characters(n), card.Characters(MaxEditChars))
}

// openEdit answers Edit… with the edit modal, holding the call's
// arguments; the bot says first whether the clicker may edit the call
// (bot.EditForm). A refusal, or arguments too large for the modal, is
// answered ephemerally instead.
func (a *Adapter) openEdit(ctx context.Context, i *discordgo.Interaction, ref string) {
	click, answer, ok := a.clickFrom(ctx, i, ref)
	if !ok {
		a.respondEphemeral(ctx, i, answer)
		return
	}
	fctx, cancel := context.WithTimeout(ctx, editFormTimeout)
	form, err := a.b.EditForm(fctx, click)
	cancel()
	if err != nil {
		if bot.IsRefusal(err) {
			a.log.Info("discord: edit refused", "user", click.User, "channel", i.ChannelID, "err", err)
		} else {
			a.log.Error("discord: edit form", "user", click.User, "channel", i.ChannelID, "err", err)
		}
		a.respondEphemeral(ctx, i, bot.UserMessage(err))
		return
	}
	value := visible.Reveal(strings.TrimSpace(form.Args))
	if n := runes(value); n > MaxEditChars {
		a.respondEphemeral(ctx, i, tooLargeToEdit(n))
		return
	}
	submitRef := ref
	if form.Ref != "" {
		submitRef = form.Ref
	}
	if len(customID(actionEditSubmit, submitRef)) > maxCustomID {
		a.respondEphemeral(ctx, i, unknownButton)
		return
	}
	number := form.Number
	if number <= 0 {
		if _, pos, err := confirm.ParseRef(submitRef); err == nil {
			number = pos + 1
		}
	}
	if err := a.respond(ctx, i, &discordgo.InteractionResponse{
		Type: discordgo.InteractionResponseModal,
		Data: holdsEdit(EditModal(submitRef, number, value), form.Holds),
	}); err != nil {
		a.log.Error("discord: open the edit modal", "interaction", i.ID, "err", err)
	}
}

// submitEdit hands an edit modal's arguments to the bot (bot.Edit). An
// edit refused for what it says (*bot.EditError) is told to the editor
// ephemerally, escaped (a modal can't show errors in place); other
// refusals as for a click.
func (a *Adapter) submitEdit(ctx context.Context, i *discordgo.Interaction, ref, args string) {
	click, ok := a.clickOf(ctx, i, ref)
	if !ok {
		return
	}
	click.Allow = true
	err := a.b.Edit(ctx, click, args)
	var ee *bot.EditError
	if errors.As(err, &ee) {
		a.log.Info("discord: edit refused", "user", click.User, "channel", i.ChannelID, "err", err)
		a.followUp(ctx, i, editRefused(ee.Message))
		return
	}
	a.refused(ctx, i, click, "edit", err)
}

// editRefused is the answer to an edit refused for what it says.
func editRefused(message string) string {
	m := strings.TrimRight(strings.TrimSpace(message), ".")
	if m == "" {
		m = "the arguments are not valid"
	}
	return "Edit refused: " + escapeClip(m, 1500) + ". Nothing changed."
}

// revoke hands a grant notice's Revoke click to the bot.
func (a *Adapter) revoke(ctx context.Context, i *discordgo.Interaction, ref string) {
	click, ok := a.clickOf(ctx, i, ref)
	if !ok {
		return
	}
	a.refused(ctx, i, click, "revoke", a.b.Revoke(ctx, click))
}

// refused tells the clicker, ephemerally, why their click changed
// nothing (err nil: it counted, nothing to say). Refusals are logged at
// Info; anything else is an error.
func (a *Adapter) refused(ctx context.Context, i *discordgo.Interaction, c bot.Click, what string, err error) {
	if err == nil {
		return
	}
	if bot.IsRefusal(err) {
		a.log.Info("discord: click changed nothing", "action", what, "user", c.User, "channel", i.ChannelID, "err", err)
	} else {
		a.log.Error("discord: "+what, "user", c.User, "channel", i.ChannelID, "err", err)
	}
	a.followUp(ctx, i, bot.UserMessage(err))
}

// clickedCall is the waiting call a "Show full …" button names, when the
// click was on that card's own message (as every button's: a click
// elsewhere is refused); nil when the clicker was answered gone (what
// names what was to be shown, for the log).
func (a *Adapter) clickedCall(ctx context.Context, i *discordgo.Interaction, ref, what, gone string) *card.Call {
	c := bot.Click{Platform: Platform, Channel: i.ChannelID, Ref: ref}
	if i.Message != nil {
		c.Message = i.Message.ID
	}
	if i.Member != nil && i.Member.User != nil {
		c.User = i.Member.User.ID
	} else if i.User != nil {
		c.User = i.User.ID
	}
	cd, err := a.b.ClickedCard(ctx, c)
	if errors.Is(err, bot.ErrStaleRevision) {
		a.respondEphemeral(ctx, i, bot.UserMessage(err))
		return nil
	}
	if err != nil && !errors.Is(err, confirm.ErrNotFound) {
		a.log.Error("discord: load the card for its "+what, "channel", i.ChannelID, "err", err)
	}
	call := cd.Call(ref)
	if call == nil {
		a.respondEphemeral(ctx, i, gone)
	}
	return call
}

// argsGone answers "Show full arguments" on a card that no longer waits.
const argsGone = "This card no longer waits for a decision, so its arguments are not shown here. The audit log keeps them."

// showArgs answers "Show full arguments" with the call's whole arguments,
// only to the clicker. The reference must name a call of a waiting card
// and the button must be on that card's message (in its thread, an
// approvals channel or a DM copy); anyone who sees it may look.
func (a *Adapter) showArgs(ctx context.Context, i *discordgo.Interaction, ref string) {
	call := a.clickedCall(ctx, i, ref, "arguments", argsGone)
	if call == nil {
		return
	}
	err := a.respond(ctx, i, &discordgo.InteractionResponse{
		Type: discordgo.InteractionResponseChannelMessageWithSource,
		Data: ArgsReply(*call),
	})
	if err != nil {
		a.log.Error("discord: answer with the arguments", "interaction", i.ID, "err", err)
	}
}

// clickChannel is the conversation channel of a click: the parent channel
// for a click in a thread, the channel itself otherwise (DMs included).
func (a *Adapter) clickChannel(ctx context.Context, i *discordgo.Interaction) (string, error) {
	th, err := a.interactionThread(ctx, i)
	return th.Channel, err
}

// interactionThread is the conversation an interaction happened in:
// (parent channel, thread) in a thread, (channel, "") elsewhere.
func (a *Adapter) interactionThread(ctx context.Context, i *discordgo.Interaction) (bot.Thread, error) {
	th := bot.Thread{Platform: Platform, Channel: i.ChannelID}
	if i.GuildID == "" {
		return th, nil
	}
	info, err := a.channel(ctx, i.ChannelID)
	if err != nil {
		return bot.Thread{}, err
	}
	if info.isThread() && info.parent != "" {
		th.Channel, th.Thread = info.parent, i.ChannelID
	}
	return th, nil
}

// textInputValue finds a modal's text input by custom id.
func textInputValue(components []discordgo.MessageComponent, id string) string {
	for _, c := range components {
		switch v := c.(type) {
		case *discordgo.ActionsRow:
			if s := textInputValue(v.Components, id); s != "" {
				return s
			}
		case discordgo.ActionsRow:
			if s := textInputValue(v.Components, id); s != "" {
				return s
			}
		case *discordgo.TextInput:
			if v.CustomID == id {
				return v.Value
			}
		case discordgo.TextInput:
			if v.CustomID == id {
				return v.Value
			}
		}
	}
	return ""
}
