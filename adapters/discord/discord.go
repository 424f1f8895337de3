// Package discord is Airlock's Discord adapter, on
// github.com/bwmarrin/discordgo: it owns everything between Discord and the
// bot. It maps gateway messages and component and modal interactions to bot
// turns, notes and clicks, and posts, routes and edits approval cards laid
// out as embeds and components from package card, so that nothing the
// model or a person wrote can ping anyone or hide.
package discord

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/gorilla/websocket"

	"github.com/airlockhq/airlock/adapters/internal/cardref"
	"github.com/airlockhq/airlock/adapters/internal/chatbot"
	"github.com/airlockhq/airlock/adapters/internal/marker"
	"github.com/airlockhq/airlock/adapters/internal/sealed"
	"github.com/airlockhq/airlock/adapters/internal/visible"
	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
)

// Platform is the name of this platform in config (`channels[].platform`)
// and in stored conversations.
const Platform = "discord"

// DefaultAPIURL is Discord's REST base.
const DefaultAPIURL = "https://discord.com/api/v9/"

// Intents are the gateway intents the adapter identifies with. Message
// Content is privileged: enable it for the application in the Developer
// Portal (Bot → Privileged Gateway Intents).
const Intents = discordgo.IntentsGuilds | discordgo.IntentsGuildMessages |
	discordgo.IntentsDirectMessages | discordgo.IntentsMessageContent

// ThreadAutoArchive is the auto archive duration, in minutes, of the
// threads the bot starts.
const ThreadAutoArchive = 1440

// shutdownGrace is how long Run lets work in flight finish after its
// context ends before cancelling it.
const shutdownGrace = 10 * time.Second

// Bot is what the adapter needs from the bot (*bot.Bot).
type Bot interface {
	chatbot.Bot
}

// EventStore de-duplicates gateway events across restarts and replicas
// (confirm.CoordinationStore's MarkEvent; *storage.DB has it).
type EventStore interface {
	MarkEvent(ctx context.Context, platform, eventID string) (bool, error)
}

// Config wires an Adapter.
type Config struct {
	// Token is the bare bot token, without the "Bot " prefix.
	Token string
	// APIURL is the REST base; empty means DefaultAPIURL. A rate-limit
	// proxy (nirn-proxy, say) or a test fake goes here.
	APIURL string
	// HTTPClient makes the REST requests; nil means a client with a 20s
	// timeout. It is copied, never changed: the copy's transport routes
	// requests to APIURL.
	HTTPClient *http.Client
	Logger     *slog.Logger
	Now        func() time.Time
	// Events, when set, records message ids so a redelivered message
	// starts no second turn even after a restart. An in-memory set of
	// recent ids is always kept.
	Events EventStore
	// Metrics, when set, records how long each interaction took to
	// acknowledge: from receiving it from the gateway to its interaction
	// response being sent. *metrics.Metrics has it.
	Metrics AckMetrics
}

// AckMetrics records acknowledgment times (*metrics.Metrics has Ack).
type AckMetrics interface {
	Ack(platform string, d time.Duration)
}

// Adapter connects the bot to Discord. It implements bot.Platform.
type Adapter struct {
	cfg   Config
	s     *discordgo.Session
	b     Bot
	inbox chatbot.Inbox // the bot's, when it has one: deliveries are recorded before their ack
	seal  sealed.Sealer // the inbox's records are sealed with the bot token: the database can't forge one
	log   *slog.Logger
	now   func() time.Time

	botID    atomic.Pointer[string]
	botName  atomic.Pointer[string]
	channels channelCache
	seen     *recentSet
	nonce    string // marks mentions made by Mention; see Post

	mu       sync.Mutex // guards the fields below
	running  bool
	stopping bool
	workCtx  context.Context
	queues   map[string][]func(context.Context)
	botRoles map[string]string // guild id -> the bot's managed role id
	// managedRoles are guilds' managed roles seen before READY told the
	// bot's name (guarded by mu); onReady matches them.
	managedRoles map[string][]*discordgo.Role
	wg           sync.WaitGroup
}

var (
	_ bot.Platform     = (*Adapter)(nil)
	_ bot.Mentioner    = (*Adapter)(nil)
	_ bot.GrantNoticer = (*Adapter)(nil)
)

// New checks the config, builds the discordgo session (not yet connected;
// see Run) and returns the adapter. Register it with the bot under Platform.
func New(cfg Config, b Bot) (*Adapter, error) {
	if b == nil {
		return nil, errors.New("discord: a bot is required")
	}
	s, err := NewSession(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	a := &Adapter{
		cfg:      cfg,
		s:        s,
		b:        b,
		log:      cfg.Logger,
		now:      cfg.Now,
		seen:     newRecentSet(8192),
		nonce:    rand.Text(),
		queues:   map[string][]func(context.Context){},
		botRoles: map[string]string{},
	}
	if ib, ok := b.(chatbot.Inbox); ok {
		a.inbox, a.seal = ib, sealed.New(Platform, cfg.Token)
	}
	if id, err := ApplicationID(cfg.Token); err == nil {
		a.botID.Store(&id) // READY confirms it
	}
	s.AddHandler(a.onReady)
	s.AddHandler(a.onGuildCreate)
	s.AddHandler(a.onChannelCreate)
	s.AddHandler(a.onChannelUpdate)
	s.AddHandler(a.onThreadCreate)
	s.AddHandler(a.onThreadUpdate)
	s.AddHandler(a.onMessageCreate)
	s.AddHandler(a.onInteractionCreate)
	return a, nil
}

// NewSession returns a discordgo session for the config, not connected:
// bot token auth, the adapter's intents, state tracking of servers and
// their roles only, and an http.Client whose transport sends REST
// requests to cfg.APIURL.
func NewSession(cfg Config) (*discordgo.Session, error) {
	token := strings.TrimSpace(cfg.Token)
	if token == "" {
		return nil, errors.New("discord: token is required")
	}
	if strings.HasPrefix(token, "Bot ") {
		return nil, errors.New(`discord: write the bare token, without the "Bot " prefix`)
	}
	apiURL := cfg.APIURL
	if apiURL == "" {
		apiURL = DefaultAPIURL
	}
	client, err := routedClient(cfg.HTTPClient, apiURL)
	if err != nil {
		return nil, err
	}
	s, err := discordgo.New("Bot " + token)
	if err != nil {
		return nil, fmt.Errorf("discord: new session: %w", err)
	}
	s.Client = client
	s.Identify.Intents = Intents
	// State keeps only the servers and their roles and owners, for the
	// moderation tools' role hierarchy check (reach.go); the adapter keeps
	// its own channel cache, and members are asked of REST when needed.
	s.StateEnabled = true
	s.State.TrackChannels = false
	s.State.TrackThreads = false
	s.State.TrackEmojis = false
	s.State.TrackStickers = false
	s.State.TrackMembers = false
	s.State.TrackThreadMembers = false
	s.State.TrackRoles = true
	s.State.TrackVoice = false
	s.State.TrackPresences = false
	s.State.MaxMessageCount = 0
	// Handlers run in the gateway reader, in order; they only queue work
	// (messages per channel, in order; interactions at once).
	s.SyncEvents = true
	return s, nil
}

// Session returns the adapter's discordgo session (for ModerationTools).
func (a *Adapter) Session() *discordgo.Session { return a.s }

// Run connects to the gateway, handles events until ctx ends, then
// disconnects and lets work in flight finish (a grace period, then its
// context is cancelled). It returns nil after a clean shutdown.
func (a *Adapter) Run(ctx context.Context) error {
	a.mu.Lock()
	if a.running {
		a.mu.Unlock()
		return errors.New("discord: Run was already called")
	}
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	a.running, a.workCtx = true, workCtx
	a.mu.Unlock()

	if err := a.s.Open(); err != nil {
		return fmt.Errorf("discord: connect to the gateway%s: %w", closeHint(err), err)
	}
	a.log.Info("discord: connected", "user", a.userID())
	<-ctx.Done()

	a.mu.Lock()
	a.stopping = true
	a.mu.Unlock()
	if err := a.s.Close(); err != nil {
		a.log.Warn("discord: close gateway", "err", err)
	}
	done := make(chan struct{})
	go func() { a.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(shutdownGrace):
		cancelWork()
		<-done
	}
	return nil
}

// closeHint explains the gateway close codes a misconfigured bot meets.
func closeHint(err error) string {
	var ce *websocket.CloseError
	if !errors.As(err, &ce) {
		return ""
	}
	switch ce.Code {
	case 4004:
		return " (authentication failed: check discord.token, the bare bot token)"
	case 4013, 4014:
		return " (intents refused: enable the Message Content intent under Bot → Privileged Gateway Intents in the Developer Portal)"
	}
	return ""
}

// spawn runs f in a goroutine counted for shutdown; false when stopping.
func (a *Adapter) spawn(f func(ctx context.Context)) bool {
	a.mu.Lock()
	if a.stopping || a.workCtx == nil {
		a.mu.Unlock()
		return false
	}
	ctx := a.workCtx
	a.wg.Add(1)
	a.mu.Unlock()
	go func() {
		defer a.wg.Done()
		f(ctx)
	}()
	return true
}

// enqueue runs job after the jobs queued before it under the same key
// (a Discord channel): messages of a channel are handled in order.
func (a *Adapter) enqueue(key string, job func(ctx context.Context)) {
	a.mu.Lock()
	q, draining := a.queues[key]
	a.queues[key] = append(q, job)
	a.mu.Unlock()
	if draining {
		return
	}
	if !a.spawn(func(ctx context.Context) { a.drain(ctx, key) }) {
		a.mu.Lock()
		delete(a.queues, key)
		a.mu.Unlock()
		a.log.Warn("discord: shutting down; message dropped", "channel", key)
	}
}

func (a *Adapter) drain(ctx context.Context, key string) {
	for {
		a.mu.Lock()
		q := a.queues[key]
		if len(q) == 0 {
			delete(a.queues, key)
			a.mu.Unlock()
			return
		}
		job := q[0]
		a.queues[key] = q[1:]
		a.mu.Unlock()
		job(ctx)
	}
}

func (a *Adapter) userID() string {
	if p := a.botID.Load(); p != nil {
		return *p
	}
	return ""
}

// target is the Discord channel a conversation's messages go to.
func target(th bot.Thread) string {
	if th.Thread != "" {
		return th.Thread
	}
	return th.Channel
}

// noMentions allows no pings: text from the model or the arguments never
// notifies anyone.
func noMentions() *discordgo.MessageAllowedMentions {
	return &discordgo.MessageAllowedMentions{Parse: []discordgo.AllowedMentionType{}}
}

// PostCard implements bot.Platform: it posts the card in the thread (in
// several messages when it does not fit in one; see RenderMessages) and
// returns the message ids, comma-separated, as the card's reference.
func (a *Adapter) PostCard(ctx context.Context, th bot.Thread, cd card.Card) (string, error) {
	return cardref.Post(RenderMessages(cd), func(m CardMessage) (string, error) {
		return a.send(ctx, th, m, "card")
	})
}

// UpdateCard implements bot.Platform: it edits the card's messages in
// place; a complete card loses its buttons. Its answer is a card's (see
// cardref.Update): a rate limit stops it, and the card is gone only when
// every message of it is.
func (a *Adapter) UpdateCard(ctx context.Context, th bot.Thread, ref string, cd card.Card) error {
	ids := cardref.Split(ref)
	msgs := RenderMessages(cd)
	if len(msgs) != len(ids) {
		a.log.Warn("discord: card reference and rendering differ in size", "ref", ref, "messages", len(msgs))
	}
	for i, id := range ids {
		if i >= len(msgs) || id == "" {
			ids = ids[:i]
			break
		}
	}
	return cardref.Update(ids, func(i int, id string) error {
		return a.editWith(ctx, th, id, msgs[i], "card message", true)
	}, func(err error) {
		a.log.Warn("discord: a message of a card is gone; its other messages are updated", "err", err)
	})
}

// PostGrantNotice implements bot.GrantNoticer: the grant's notice in the
// thread (see RenderGrantNotice), pinging nobody; its message id is the
// reference.
func (a *Adapter) PostGrantNotice(ctx context.Context, th bot.Thread, n card.GrantNotice) (string, error) {
	return a.send(ctx, th, RenderGrantNotice(n, a.now()), "grant notice")
}

// UpdateGrantNotice implements bot.GrantNoticer: it edits the notice in
// place; a revoked grant's notice loses its Revoke button. It is the
// card-sync job's: its answer is classified as a card's (see editWith).
func (a *Adapter) UpdateGrantNotice(ctx context.Context, th bot.Thread, ref string, n card.GrantNotice) error {
	if !isSnowflake(ref) {
		return fmt.Errorf("discord: grant notice reference %q is not a message id", ref)
	}
	return a.editWith(ctx, th, ref, RenderGrantNotice(n, a.now()), "grant notice", true)
}

// Unknown outcomes. A run whose outcome is unknown gates its tool in the
// thread until a person marks it checked: its card (or, for a call no
// card shows, its thread line, see RenderUnknownNotice) carries "I checked
// — go on" (custom id "al:k:<checked reference>"). The bot judges the
// click (an approver of the channel); the line is then edited to say who
// checked it and when, without the button.
var _ bot.UnknownNoticer = (*Adapter)(nil)

// PostUnknownNotice implements bot.UnknownNoticer: the line in the thread,
// pinging nobody; its message id is the reference.
func (a *Adapter) PostUnknownNotice(ctx context.Context, th bot.Thread, n card.UnknownNotice) (string, error) {
	return a.send(ctx, th, RenderUnknownNotice(n), "unknown outcome")
}

// UpdateUnknownNotice implements bot.UnknownNoticer: it edits the line in
// place; once checked it has no button.
func (a *Adapter) UpdateUnknownNotice(ctx context.Context, th bot.Thread, ref string, n card.UnknownNotice) error {
	return a.editRef(ctx, th, ref, RenderUnknownNotice(n), "unknown outcome")
}

var _ bot.RunMessenger = (*Adapter)(nil)

// PostRun posts a runbook run's message in the thread; its message id is
// the reference (a click counts only on it).
func (a *Adapter) PostRun(ctx context.Context, th bot.Thread, r card.Run) (string, error) {
	return a.send(ctx, th, RenderRun(r), "run message")
}

// UpdateRun edits the run message in place; an ended run's loses its
// buttons. It is the card-sync job's: its answer is classified as a
// card's (see editWith).
func (a *Adapter) UpdateRun(ctx context.Context, th bot.Thread, ref string, r card.Run) error {
	if !isSnowflake(ref) {
		return fmt.Errorf("discord: run message reference %q is not a message id", ref)
	}
	return a.editWith(ctx, th, ref, RenderRun(r), "run message", true)
}

// send posts one rendered message in the thread, pinging nobody, and
// returns its id.
func (a *Adapter) send(ctx context.Context, th bot.Thread, m CardMessage, what string) (string, error) {
	sent, err := a.s.ChannelMessageSendComplex(target(th), &discordgo.MessageSend{
		Content:         m.Content,
		Embeds:          m.Embeds,
		Components:      m.Components,
		AllowedMentions: noMentions(),
	}, discordgo.WithContext(ctx))
	if err != nil {
		return "", fmt.Errorf("discord: post %s: %w", what, err)
	}
	return sent.ID, nil
}

// editRef is edit of a message the bot holds a reference to: a reference
// that is not a message id is an error, and nothing is sent.
func (a *Adapter) editRef(ctx context.Context, th bot.Thread, ref string, m CardMessage, what string) error {
	if !isSnowflake(ref) {
		return fmt.Errorf("discord: %s reference %q is not a message id", what, ref)
	}
	return a.edit(ctx, th, ref, m, what)
}

// edit replaces a message with a rendered one, pinging nobody: embeds and
// buttons the new rendering lacks are removed.
func (a *Adapter) edit(ctx context.Context, th bot.Thread, id string, m CardMessage, what string) error {
	return a.editWith(ctx, th, id, m, what, false)
}

// editWith is edit; for the card-sync job (sync: cards, pointers, run
// messages and grant notices) the
// answer is classified and a 429 is not waited out by discordgo: a
// *bot.RateLimitedError with the route's retry_after (Scope the channel:
// Discord limits per route), bot.ErrMessageGone for Unknown Message
// (10008) or Unknown Channel (10003). discordgo's own limiter still waits,
// before sending, for a route's bucket it knows to be empty until its
// reset (X-RateLimit-Reset-After), and for the global limit.
func (a *Adapter) editWith(ctx context.Context, th bot.Thread, id string, m CardMessage, what string, sync bool) error {
	content, embeds, components := m.Content, m.Embeds, m.Components
	if embeds == nil {
		embeds = []*discordgo.MessageEmbed{}
	}
	if components == nil {
		components = []discordgo.MessageComponent{}
	}
	_, err := a.s.ChannelMessageEditComplex(&discordgo.MessageEdit{
		ID: id, Channel: target(th),
		Content:         &content,
		Embeds:          &embeds,
		Components:      &components,
		AllowedMentions: noMentions(),
	}, discordgo.WithContext(ctx), discordgo.WithRetryOnRatelimit(!sync))
	if err != nil {
		if sync {
			err = classifyEdit(target(th), err)
		}
		return fmt.Errorf("discord: update %s %s: %w", what, id, err)
	}
	return nil
}

// classifyEdit maps a message edit's error to the bot's classes.
func classifyEdit(channel string, err error) error {
	var rl *discordgo.RateLimitError
	var re *discordgo.RESTError
	switch {
	case errors.As(err, &rl) && rl.RateLimit != nil && rl.TooManyRequests != nil:
		return &bot.RateLimitedError{Platform: Platform, Method: "PATCH message", Scope: channel, RetryAfter: rl.RetryAfter, Err: err}
	case errors.As(err, &re) && re.Message != nil &&
		(re.Message.Code == discordgo.ErrCodeUnknownMessage || re.Message.Code == discordgo.ErrCodeUnknownChannel):
		return fmt.Errorf("%w: %w", bot.ErrMessageGone, err)
	}
	return err
}

// Post implements bot.Platform: text in the thread, split in messages of
// at most 2000 characters, pinging nobody. A reminder, text holding the
// markers Mention made, is the one exception: the markers become
// mentions of exactly those approvers, allowed to ping, and the rest of
// its text is escaped inert (it quotes the calls' read-backs). Other
// texts (the model's answers, notices) keep their markdown, with bidi and
// invisible characters shown escaped.
func (a *Adapter) Post(ctx context.Context, th bot.Thread, text string) error {
	ch := target(th)
	content, users, roles := a.renderPost(text)
	for _, part := range splitText(content, maxContent) {
		am := noMentions()
		am.Users, am.Roles = users, roles
		_, err := a.s.ChannelMessageSendComplex(ch, &discordgo.MessageSend{
			Content:         part,
			AllowedMentions: am,
		}, discordgo.WithContext(ctx))
		if err != nil {
			return fmt.Errorf("discord: post: %w", err)
		}
	}
	return nil
}

// Mention implements bot.Mentioner: the approvers of a set, for a
// reminder the bot then posts with Post. It returns markers carrying the
// adapter's secret nonce, which Post turns into <@user> and <@&role>
// allowed to ping; the same characters written by a model stay inert.
func (a *Adapter) Mention(s confirm.Approvers) string {
	m := marker.Set{Nonce: a.nonce}
	m.Add("u", s.Users, isSnowflake)
	m.Add("r", s.Roles, isSnowflake)
	return m.String()
}

// mentionMarker matches a mention marker: "<nonce>:<u|r><id>".
var mentionMarker = marker.Pattern("([ur])([0-9]{1,20})")

// renderPost is the content of a Post and who may be pinged: nobody
// unless text holds markers of this adapter's nonce.
func (a *Adapter) renderPost(text string) (content string, users, roles []string) {
	marks := mentionMarker.FindAllStringSubmatchIndex(text, -1)
	ours := false
	for _, m := range marks {
		if text[m[2]:m[3]] == a.nonce {
			ours = true
		}
	}
	if !ours {
		return visible.RevealProse(mentionMarker.ReplaceAllString(text, "")), nil, nil
	}
	var b strings.Builder
	last := 0
	for _, m := range marks {
		b.WriteString(escapeMarkdown(text[last:m[0]]))
		last = m[1]
		if text[m[2]:m[3]] != a.nonce {
			continue // a guess at the nonce: dropped
		}
		id := text[m[6]:m[7]]
		if text[m[4]:m[5]] == "u" {
			b.WriteString("<@" + id + ">")
			if !slices.Contains(users, id) && len(users) < 100 {
				users = append(users, id)
			}
		} else {
			b.WriteString("<@&" + id + ">")
			if !slices.Contains(roles, id) && len(roles) < 100 {
				roles = append(roles, id)
			}
		}
	}
	b.WriteString(escapeMarkdown(text[last:]))
	return b.String(), users, roles
}

// routedClient copies c (or a default client) with a transport that sends
// discordgo's REST requests to apiURL.
func routedClient(c *http.Client, apiURL string) (*http.Client, error) {
	to, err := url.Parse(apiURL)
	if err != nil || (to.Scheme != "http" && to.Scheme != "https") || to.Host == "" {
		return nil, fmt.Errorf("discord: api_url %q must be an http:// or https:// URL", apiURL)
	}
	if !strings.HasSuffix(to.Path, "/") {
		to.Path += "/"
	}
	to.RawPath, to.RawQuery, to.Fragment = "", "", ""
	from, err := url.Parse(discordgo.EndpointAPI)
	if err != nil {
		return nil, fmt.Errorf("discord: discordgo's API endpoint: %w", err)
	}
	var out http.Client
	if c != nil {
		out = *c
	} else {
		out.Timeout = 20 * time.Second
	}
	base := out.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	out.Transport = &routeTransport{from: from, to: to, base: base}
	return &out, nil
}

// routeTransport rewrites requests for discordgo's REST base (by default
// https://discord.com/api/v9/) to the configured base, keeping the rest of
// the path and the query. Other requests (the CDN) pass unchanged.
type routeTransport struct {
	from, to *url.URL
	base     http.RoundTripper
}

func (t *routeTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	u := req.URL
	path := u.EscapedPath()
	if u.Scheme != t.from.Scheme || u.Host != t.from.Host || !strings.HasPrefix(path, t.from.Path) {
		return t.base.RoundTrip(req)
	}
	if t.to.Scheme == t.from.Scheme && t.to.Host == t.from.Host && t.to.Path == t.from.Path {
		return t.base.RoundTrip(req)
	}
	raw := t.to.EscapedPath() + strings.TrimPrefix(path, t.from.Path)
	dec, err := url.PathUnescape(raw)
	if err != nil {
		return nil, fmt.Errorf("discord: route request: %w", err)
	}
	nu := *t.to
	nu.Path, nu.RawPath, nu.RawQuery = dec, raw, u.RawQuery
	r2 := req.Clone(req.Context())
	r2.URL = &nu
	r2.Host = ""
	return t.base.RoundTrip(r2)
}

// recentSet remembers the last n keys added.
type recentSet struct {
	mu   sync.Mutex
	keys map[string]struct{}
	ring []string
	next int
}

func newRecentSet(n int) *recentSet {
	return &recentSet{keys: make(map[string]struct{}, n), ring: make([]string, n)}
}

// add records key and reports whether it was new.
func (r *recentSet) add(key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.keys[key]; ok {
		return false
	}
	if old := r.ring[r.next]; old != "" {
		delete(r.keys, old)
	}
	r.ring[r.next] = key
	r.next = (r.next + 1) % len(r.ring)
	r.keys[key] = struct{}{}
	return true
}
