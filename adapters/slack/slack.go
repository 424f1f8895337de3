// Package slack is Airlock's Slack adapter, on github.com/slack-go/slack:
// it owns everything between Slack and the bot. It receives events and
// interactivity (Socket Mode or one signed HTTP URL) from the installed
// workspace only and maps them to bot turns, asides and clicks; it posts,
// routes and updates approval cards laid out as Block Kit from package
// card, with everything others wrote shown inert.
package slack

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/slack-go/slack"

	"github.com/airlockhq/airlock/adapters/internal/cardref"
	"github.com/airlockhq/airlock/adapters/internal/chatbot"
	"github.com/airlockhq/airlock/adapters/internal/marker"
	"github.com/airlockhq/airlock/adapters/internal/sealed"
	"github.com/airlockhq/airlock/bot"
	cardpkg "github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
)

// Platform is this platform's name in config (`channels[].platform`) and
// in stored conversations.
const Platform = "slack"

// Connection modes (config `slack.mode`).
const (
	ModeSocket = "socket"
	ModeHTTP   = "http"
)

// DefaultAPIURL is the Slack Web API base.
const DefaultAPIURL = "https://slack.com/api/"

// Defaults.
const (
	DefaultGroupTTL    = 60 * time.Second // how long a user group's members are cached
	DefaultConcurrency = 16               // events and clicks worked on at once (Config.Workers)
	maxBodyBytes       = 4 << 20          // largest HTTP request accepted
)

// Config wires an Adapter. Secrets come from the config file (which may
// reference ${ENV}); the adapter never reads the environment itself.
type Config struct {
	Mode          string // socket (default) | http
	BotToken      string // xoxb-…, every Web API call
	AppToken      string // xapp-…, Socket Mode only
	SigningSecret string // HTTP mode only: verifies every request
	APIURL        string // Web API base; default https://slack.com/api/
	HTTPClient    *http.Client
	Now           func() time.Time
	Logger        *slog.Logger
	// Workers is how many events and clicks are worked on at once;
	// default DefaultConcurrency. Deliveries beyond it wait in a queue
	// (the delivery itself, not a goroutine), already acknowledged.
	Workers int
	// Metrics, when set, records how long each event and click took to
	// acknowledge: from receiving it to the HTTP response being written
	// (http mode) or the Socket Mode ack being sent. *metrics.Metrics has
	// it.
	Metrics AckMetrics
	// Home takes a person's opening of their Home tab (*bot.Bot); nil:
	// the tab is not published.
	Home HomeOpener
	// Trace, when set, is called at named points of a delivery's path
	// ("slack-acked-interaction", "slack-acked-event": acknowledged, its
	// work not yet started); tests kill the process there.
	Trace func(point string)
}

// AckMetrics records acknowledgment times (*metrics.Metrics has Ack).
type AckMetrics interface {
	Ack(platform string, d time.Duration)
}

// Bot is what the adapter needs from *bot.Bot.
type Bot interface {
	chatbot.Bot
	Channels() *bot.Channels
}

// EventStore is what the adapter needs from storage: recording event ids
// so a retried delivery starts no second turn. When it also has Grant
// (GrantStore), cards say whose grant allowed a call.
type EventStore interface {
	MarkEvent(ctx context.Context, platform, eventID string) (first bool, err error)
}

// Adapter connects Airlock to one Slack workspace.
type Adapter struct {
	cfg   Config
	bot   Bot
	store EventStore
	inbox chatbot.Inbox // the bot's, when it has one: deliveries are recorded before their ack
	seal  sealed.Sealer // the inbox's records are sealed with the bot token: the database can't forge one
	api   *slack.Client
	// updates sends cards' and pointers' updates without retries of its
	// own (see syncUpdate).
	updates *slack.Client
	log     *slog.Logger
	now     func() time.Time
	groups  *groupCache
	grants  *grantNames
	dms     dmCache

	mu      sync.RWMutex
	self    identity
	baseCtx context.Context

	wg   sync.WaitGroup
	pool pool

	mentionNonce string // marks mentions made by Mention; see Post

	editWait time.Duration // how long an edit submission's answer waits for the bot (editWait)
}

// identity is who the bot is in the workspace, from auth.test.
type identity struct {
	UserID string
	BotID  string
	TeamID string
}

var (
	_ bot.Platform     = (*Adapter)(nil)
	_ bot.Mentioner    = (*Adapter)(nil)
	_ bot.GrantNoticer = (*Adapter)(nil)
	_ bot.Router       = (*Adapter)(nil)
)

// New checks the config and returns an adapter. It installs the Slack user
// group resolver on the bot's approvers. Call Start before Run or Handler.
func New(cfg Config, b Bot, store EventStore) (*Adapter, error) {
	if b == nil || store == nil {
		return nil, errors.New("slack: a bot and an event store are required")
	}
	if cfg.Mode == "" {
		cfg.Mode = ModeSocket
	}
	if cfg.BotToken == "" {
		return nil, errors.New("slack: bot_token is required (xoxb-...)")
	}
	switch cfg.Mode {
	case ModeSocket:
		if cfg.AppToken == "" {
			return nil, errors.New("slack: app_token is required in socket mode (xapp-...)")
		}
	case ModeHTTP:
		if cfg.SigningSecret == "" {
			return nil, errors.New("slack: signing_secret is required in http mode")
		}
	default:
		return nil, fmt.Errorf("slack: mode %q is not one of socket, http", cfg.Mode)
	}
	if cfg.APIURL == "" {
		cfg.APIURL = DefaultAPIURL
	}
	if !strings.HasPrefix(cfg.APIURL, "http://") && !strings.HasPrefix(cfg.APIURL, "https://") {
		return nil, fmt.Errorf("slack: api_url %q must be an http:// or https:// URL", cfg.APIURL)
	}
	if !strings.HasSuffix(cfg.APIURL, "/") {
		cfg.APIURL += "/" // slack-go appends the method name
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultConcurrency
	}
	if cfg.HTTPClient == nil {
		// http.DefaultTransport keeps 2 idle connections per host: with
		// more workers calling the Web API at once, the others would open
		// (and TLS-handshake) a new connection per call.
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = cfg.Workers
		cfg.HTTPClient = &http.Client{Timeout: 30 * time.Second, Transport: t}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	opts := []slack.Option{
		slack.OptionAPIURL(cfg.APIURL),
		slack.OptionHTTPClient(cfg.HTTPClient),
	}
	if cfg.AppToken != "" {
		opts = append(opts, slack.OptionAppLevelToken(cfg.AppToken))
	}
	// Cards' and pointers' updates go to the card-sync job's client: it
	// does not wait out a 429 itself but returns it, so the job keeps
	// the message queued until Retry-After and sends the latest state.
	updates := slack.New(cfg.BotToken, opts...)
	// After the client: the rest are sent again after a 429 (after its
	// Retry-After), a 5xx or a failed connection (backing off from 1 s to
	// 30 s), up to postRetries times, so a thread's message (the model's
	// answer, a card) outlasts a stretch of Slack's trouble rather than
	// being lost. A 429 means Slack did nothing; a 5xx almost always does,
	// and a message posted twice beats one lost.
	retry := slack.DefaultRetryConfig()
	retry.MaxRetries, retry.BackoffInitial, retry.BackoffMax = postRetries, time.Second, 30*time.Second
	retry.Handlers = append(slack.AllBuiltinRetryHandlers(retry), slack.NewServerErrorRetryHandler(retry))
	opts = append(opts, slack.OptionRetryConfig(retry))
	a := &Adapter{
		cfg:     cfg,
		bot:     b,
		store:   store,
		api:     slack.New(cfg.BotToken, opts...),
		updates: updates,
		log:     cfg.Logger.With("platform", Platform),
		now:     cfg.Now,
		baseCtx: context.Background(),
		pool:    pool{max: cfg.Workers},

		mentionNonce: rand.Text(),
		editWait:     editWait,
	}
	if ib, ok := b.(chatbot.Inbox); ok {
		a.inbox, a.seal = ib, sealed.New(Platform, cfg.BotToken)
	}
	a.groups = newGroupCache(a.fetchGroup, cfg.Now, DefaultGroupTTL)
	a.grants = &grantNames{}
	if gs, ok := store.(GrantStore); ok {
		a.grants.store = gs
	}
	if ap := b.Channels(); ap != nil {
		ap.SetGroupResolver(Platform, a.groups.members)
	}
	return a, nil
}

// Start learns the bot's own user id with auth.test (checking the bot
// token) and keeps ctx as the lifetime of the work the adapter starts.
func (a *Adapter) Start(ctx context.Context) error {
	resp, err := a.api.AuthTestContext(ctx)
	if err != nil {
		return fmt.Errorf("slack: auth.test (check slack.bot_token): %w", err)
	}
	if resp.UserID == "" {
		return errors.New("slack: auth.test returned no user id: is slack.bot_token a bot token (xoxb-...)?")
	}
	if resp.TeamID == "" {
		return errors.New("slack: auth.test returned no team id: Airlock serves the one workspace its bot token is installed in")
	}
	a.mu.Lock()
	a.self = identity{UserID: resp.UserID, BotID: resp.BotID, TeamID: resp.TeamID}
	a.baseCtx = ctx
	a.mu.Unlock()
	a.log.Info("slack: signed in", "team", resp.TeamID, "bot_user", resp.UserID, "mode", a.cfg.Mode)
	return nil
}

// Run serves Slack until ctx ends: in socket mode it holds the Socket
// Mode connection (reconnecting as Slack asks); in http mode it only waits,
// the work arriving through Handler. It returns after the work in flight
// is done.
func (a *Adapter) Run(ctx context.Context) error {
	if a.identity().UserID == "" {
		return errors.New("slack: Run before Start")
	}
	defer a.wg.Wait()
	if a.cfg.Mode == ModeSocket {
		return a.runSocket(ctx)
	}
	<-ctx.Done()
	return nil
}

// Wait blocks until the events and clicks received so far are worked off.
func (a *Adapter) Wait() { a.wg.Wait() }

// ourTeam reports whether a delivery comes from the installed workspace;
// anything else is dropped and logged.
func (a *Adapter) ourTeam(team, what string) bool {
	if want := a.identity().TeamID; want != "" && team == want {
		return true
	}
	a.log.Warn("slack: "+what+" from another workspace ignored", "team", clip(team, 40))
	return false
}

// BotUserID is the bot's own Slack user id, known after Start.
func (a *Adapter) BotUserID() string { return a.identity().UserID }

func (a *Adapter) identity() identity {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.self
}

func (a *Adapter) context() context.Context {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.baseCtx
}

// spawn queues fn, to be worked on after the delivery was acknowledged
// by one of at most cfg.Workers goroutines. Queueing never waits.
func (a *Adapter) spawn(what string, fn func(ctx context.Context)) {
	a.reserve()(what, fn)
}

// reserve counts a job before the delivery is acknowledged, so Wait (and
// Run's shutdown) cannot return between the ack and the queueing, and
// returns the function that queues it. Every reserve must be queued.
func (a *Adapter) reserve() func(what string, fn func(ctx context.Context)) {
	a.wg.Add(1)
	return func(what string, fn func(ctx context.Context)) {
		if a.pool.push(job{what: what, fn: fn}) {
			go a.work()
		}
	}
}

// work runs queued jobs until the queue is empty.
func (a *Adapter) work() {
	for {
		j, ok := a.pool.pop()
		if !ok {
			return
		}
		a.run(j)
	}
}

func (a *Adapter) run(j job) {
	defer a.wg.Done()
	ctx := a.context()
	if ctx.Err() != nil {
		a.log.Warn("slack: shutting down; dropped work", "work", j.what)
		return
	}
	defer func() {
		if p := recover(); p != nil {
			a.log.Error("slack: panic while working", "work", j.what, "panic", fmt.Sprint(p))
		}
	}()
	j.fn(ctx)
}

// acked records the time from receiving a delivery to acknowledging it.
func (a *Adapter) acked(received time.Time) {
	if a.cfg.Metrics != nil {
		a.cfg.Metrics.Ack(Platform, time.Since(received))
	}
}

// trace calls Config.Trace at a named point.
func (a *Adapter) trace(point string) {
	if a.cfg.Trace != nil {
		a.cfg.Trace(point)
	}
}

// --- bot.Platform ---

// PostCard posts the card in the thread, in several messages when it has
// more calls than one holds (see RenderMessages), and returns their
// references "<channel>/<ts>", comma-separated in order: the card's
// reference, every message of which takes clicks and is updated. A post
// that fails part way returns the messages posted so far with the error.
func (a *Adapter) PostCard(ctx context.Context, th bot.Thread, c cardpkg.Card) (string, error) {
	return cardref.Post(RenderMessages(c, a.grants.of(ctx, c)), func(m CardMessage) (string, error) {
		return a.postBlocks(ctx, th, "card", m.Blocks, m.Text)
	})
}

// UpdateCard replaces each message of the posted card (chat.update), the
// card rendered into as many messages as it was posted in. A rate limit
// stops it (the card-sync job sends them all again after it); a message
// deleted in Slack is skipped, and only when every one is gone is the card
// gone (bot.ErrMessageGone); other failures are returned together after
// every message was tried.
func (a *Adapter) UpdateCard(ctx context.Context, th bot.Thread, ref string, c cardpkg.Card) error {
	refs := cardref.Split(ref)
	msgs := RenderMessagesIn(c, a.grants.of(ctx, c), len(refs))
	return cardref.Update(refs, func(i int, r string) error {
		return a.syncUpdate(ctx, r, "card", msgs[i].Blocks, msgs[i].Text)
	}, func(err error) {
		a.log.Warn("slack: a message of a card is gone; its other messages are updated", "err", err)
	})
}

// PostGrantNotice implements bot.GrantNoticer: it posts the notice in
// the thread and returns "<channel>/<ts>".
func (a *Adapter) PostGrantNotice(ctx context.Context, th bot.Thread, n cardpkg.GrantNotice) (string, error) {
	a.grants.remember(n.GrantID, n.By)
	return a.postBlocks(ctx, th, "grant notice", RenderGrantNotice(n, a.now()), GrantNoticeText(n))
}

// UpdateGrantNotice implements bot.GrantNoticer: it replaces the posted
// notice (chat.update), without Revoke once the grant is revoked; for the
// card-sync job, its answer classified as a card's (see syncUpdate).
func (a *Adapter) UpdateGrantNotice(ctx context.Context, th bot.Thread, ref string, n cardpkg.GrantNotice) error {
	return a.syncUpdate(ctx, ref, "grant notice", RenderGrantNotice(n, a.now()), GrantNoticeText(n))
}

var _ bot.UnknownNoticer = (*Adapter)(nil)

// PostUnknownNotice implements bot.UnknownNoticer: it posts the line in
// the thread and returns "<channel>/<ts>".
func (a *Adapter) PostUnknownNotice(ctx context.Context, th bot.Thread, n cardpkg.UnknownNotice) (string, error) {
	return a.postBlocks(ctx, th, "unknown outcome", RenderUnknownNotice(n), UnknownNoticeText(n))
}

// UpdateUnknownNotice implements bot.UnknownNoticer: it replaces the
// posted line (chat.update), without the button once checked.
func (a *Adapter) UpdateUnknownNotice(ctx context.Context, th bot.Thread, ref string, n cardpkg.UnknownNotice) error {
	return a.updateBlocks(ctx, ref, "unknown outcome", RenderUnknownNotice(n), UnknownNoticeText(n))
}

var _ bot.RunMessenger = (*Adapter)(nil)

// PostRun posts a runbook run's message in the thread.
func (a *Adapter) PostRun(ctx context.Context, th bot.Thread, r cardpkg.Run) (string, error) {
	blocks, fallback := RenderRun(r)
	return a.postBlocks(ctx, th, "run", blocks, fallback)
}

// UpdateRun replaces a run message PostRun posted, for the card-sync
// job: its answer classified as a card's (see syncUpdate).
func (a *Adapter) UpdateRun(ctx context.Context, _ bot.Thread, ref string, r cardpkg.Run) error {
	blocks, fallback := RenderRun(r)
	return a.syncUpdate(ctx, ref, "run", blocks, fallback)
}

// syncUpdate replaces a card message, a run message or a grant notice
// (chat.update) for the card-sync job,
// its answer classified: a 429 is a *bot.RateLimitedError with its
// Retry-After (Tier 3 is per workspace and method: Scope ""), a message or
// channel that no longer exists is bot.ErrMessageGone; anything else (5xx,
// the network) is returned as it is, for the job's backoff.
func (a *Adapter) syncUpdate(ctx context.Context, ref, what string, blocks []slack.Block, text string) error {
	ch, ts, err := ParseCardRef(ref)
	if err != nil {
		return err
	}
	_, _, _, err = a.updates.UpdateMessageContext(ctx, ch, ts, slack.MsgOptionBlocks(blocks...), slack.MsgOptionText(text, false))
	if err == nil {
		return nil
	}
	return fmt.Errorf("slack: chat.update (%s): %w", what, classifyUpdate(err))
}

// classifyUpdate maps a chat.update error to the bot's classes.
func classifyUpdate(err error) error {
	var rl *slack.RateLimitedError
	var se slack.SlackErrorResponse
	switch {
	case errors.As(err, &rl):
		return &bot.RateLimitedError{Platform: Platform, Method: "chat.update", RetryAfter: rl.RetryAfter, Err: err}
	case errors.As(err, &se) && (se.Err == "message_not_found" || se.Err == "channel_not_found"):
		return fmt.Errorf("%w: %w", bot.ErrMessageGone, err)
	}
	return err
}

// postBlocks posts a message of Airlock's (a card, a grant notice, a
// reminder; text only without blocks) in the thread, without unfurls, and
// returns its reference "<channel>/<ts>".
func (a *Adapter) postBlocks(ctx context.Context, th bot.Thread, what string, blocks []slack.Block, text string) (string, error) {
	opts := []slack.MsgOption{
		slack.MsgOptionText(text, false),
		slack.MsgOptionDisableLinkUnfurl(),
		slack.MsgOptionDisableMediaUnfurl(),
	}
	if len(blocks) > 0 {
		opts = append(opts, slack.MsgOptionBlocks(blocks...))
	}
	if th.Thread != "" {
		opts = append(opts, slack.MsgOptionTS(th.Thread))
	}
	ch, ts, err := a.api.PostMessageContext(ctx, th.Channel, opts...)
	if err != nil {
		return "", fmt.Errorf("slack: chat.postMessage (%s): %w", what, err)
	}
	if ch == "" {
		ch = th.Channel
	}
	return CardRef(ch, ts), nil
}

// updateBlocks replaces a message postBlocks posted (chat.update).
func (a *Adapter) updateBlocks(ctx context.Context, ref, what string, blocks []slack.Block, text string) error {
	ch, ts, err := ParseCardRef(ref)
	if err != nil {
		return err
	}
	if _, _, _, err := a.api.UpdateMessageContext(ctx, ch, ts, slack.MsgOptionBlocks(blocks...), slack.MsgOptionText(text, false)); err != nil {
		return fmt.Errorf("slack: chat.update (%s): %w", what, err)
	}
	return nil
}

// maxPostChars is the longest text posted as one message; longer answers
// are split, at line breaks where possible.
const maxPostChars = 3800

// postRetries is how often a Web API call other than a card's update is
// sent again after a 429, a 5xx or a failed connection.
const postRetries = 8

// maxReminderChars bounds a reminder's text (it quotes the read-backs of
// the calls that wait).
const maxReminderChars = 2900

// Post posts text in the thread. The text is escaped, so a model cannot
// mention people, @channel, @here or user groups, or make links; bidi and
// invisible characters show escaped. Only a reminder, text holding the
// markers Mention made, mentions anyone: exactly the approvers it names
// (see reminder).
func (a *Adapter) Post(ctx context.Context, th bot.Thread, text string) error {
	if blocks, fallback, ok := a.reminder(text); ok {
		_, err := a.postBlocks(ctx, th, "reminder", blocks, fallback)
		return err
	}
	for _, part := range splitText(postText(mentionMarker.ReplaceAllString(text, "")), maxPostChars) {
		if _, err := a.postBlocks(ctx, th, "text", nil, part); err != nil {
			return err
		}
	}
	return nil
}

// Mention implements bot.Mentioner: the approvers of a set, for a
// reminder the bot then posts with Post. It returns markers carrying a
// secret nonce that Post turns into mentions of those users and groups;
// the same characters written by a model stay inert text.
func (a *Adapter) Mention(s confirm.Approvers) string {
	m := marker.Set{Nonce: a.mentionNonce}
	m.Add("", s.Users, userIDPattern.MatchString)
	m.Add("", s.Groups, groupIDPattern.MatchString)
	return m.String()
}

// mentionMarker matches a mention marker: "<nonce>:<id>".
var mentionMarker = marker.Pattern("([A-Z0-9]+)")

// reminder renders text holding this adapter's mention markers: the
// markers become mentions (<@U…>, <!subteam^S…> in the fallback text,
// user and usergroup elements in the message), the rest, which quotes the
// calls' read-backs, literal rich text. ok is false for any other text.
// Markers with another nonce (a model guessing) are dropped.
func (a *Adapter) reminder(text string) (blocks []slack.Block, fallback string, ok bool) {
	marks := mentionMarker.FindAllStringSubmatchIndex(text, -1)
	for _, m := range marks {
		ok = ok || text[m[2]:m[3]] == a.mentionNonce
	}
	if !ok {
		return nil, "", false
	}
	var els []slack.RichTextSectionElement
	var fb strings.Builder
	budget := maxReminderChars
	literal := func(s string) {
		if s == "" || budget <= 0 {
			return
		}
		s = revealClip(s, budget)
		budget -= utf8.RuneCountInString(s)
		els = append(els, rtText(s, nil))
		fb.WriteString(escape(s))
	}
	last := 0
	for _, m := range marks {
		literal(text[last:m[0]])
		last = m[1]
		id := text[m[4]:m[5]]
		switch {
		case text[m[2]:m[3]] != a.mentionNonce:
		case userIDPattern.MatchString(id):
			els = append(els, slack.NewRichTextSectionUserElement(id, nil))
			fb.WriteString("<@" + id + ">")
		case groupIDPattern.MatchString(id):
			els = append(els, slack.NewRichTextSectionUserGroupElement(id))
			fb.WriteString("<!subteam^" + id + ">")
		}
	}
	literal(text[last:])
	return []slack.Block{slack.NewRichTextBlock("reminder", slack.NewRichTextSection(els...))}, fb.String(), true
}

// ephemeral tells one person something only they see, in the thread.
func (a *Adapter) ephemeral(ctx context.Context, channel, thread, user, text string) {
	if channel == "" || user == "" {
		return
	}
	opts := []slack.MsgOption{slack.MsgOptionText(text, true)}
	if thread != "" {
		opts = append(opts, slack.MsgOptionTS(thread))
	}
	if _, err := a.api.PostEphemeralContext(ctx, channel, user, opts...); err != nil {
		a.log.Error("slack: chat.postEphemeral", "channel", channel, "user", user, "err", err)
	}
}

// splitText cuts text into parts of at most n characters, at a line break
// in the second half of a part when there is one.
func splitText(text string, n int) []string {
	r := []rune(text)
	if len(r) <= n {
		return []string{text}
	}
	var out []string
	for len(r) > n {
		cut := n
		for i := n; i > n/2; i-- {
			if r[i-1] == '\n' {
				cut = i
				break
			}
		}
		out = append(out, string(r[:cut]))
		r = r[cut:]
	}
	if len(r) > 0 {
		out = append(out, string(r))
	}
	return out
}

// --- card references ---

var (
	channelIDPattern = regexp.MustCompile(`^[CDGZ][A-Z0-9]{2,40}$`)
	tsPattern        = regexp.MustCompile(`^[0-9]{1,12}\.[0-9]{1,9}$`)
)

// CardRef is the reference PostCard and PostGrantNotice return:
// "<channel id>/<message ts>".
func CardRef(channel, ts string) string { return channel + "/" + ts }

// ParseCardRef splits a reference made by CardRef.
func ParseCardRef(ref string) (channel, ts string, err error) {
	channel, ts, ok := strings.Cut(ref, "/")
	if !ok || !channelIDPattern.MatchString(channel) || !tsPattern.MatchString(ts) {
		return "", "", fmt.Errorf("slack: malformed card reference %q", clip(ref, 80))
	}
	return channel, ts, nil
}

// --- user groups ---

func (a *Adapter) fetchGroup(ctx context.Context, group string) ([]string, error) {
	users, err := a.api.GetUserGroupMembersContext(ctx, group)
	if err != nil {
		a.log.Warn("slack: usergroups.users.list failed; the group grants nothing until it resolves", "group", group, "err", err)
		return nil, fmt.Errorf("slack: usergroups.users.list %s: %w", group, err)
	}
	return users, nil
}

// groupCache keeps a user group's members for ttl. Concurrent lookups of
// one group share one request; failures are not kept.
type groupCache struct {
	fetch func(ctx context.Context, group string) ([]string, error)
	now   func() time.Time
	ttl   time.Duration

	mu      sync.Mutex
	entries map[string]*groupEntry
}

type groupEntry struct {
	done    chan struct{}
	users   []string
	err     error
	expires time.Time
}

func newGroupCache(fetch func(context.Context, string) ([]string, error), now func() time.Time, ttl time.Duration) *groupCache {
	return &groupCache{fetch: fetch, now: now, ttl: ttl, entries: map[string]*groupEntry{}}
}

// members is a bot.GroupResolver.
func (g *groupCache) members(ctx context.Context, group string) ([]string, error) {
	g.mu.Lock()
	e := g.entries[group]
	if e != nil {
		select {
		case <-e.done:
			if e.err != nil || !g.now().Before(e.expires) {
				e = nil // failed or stale: fetch again
			}
		default: // in flight: share it
		}
	}
	if e == nil {
		e = &groupEntry{done: make(chan struct{})}
		g.entries[group] = e
		g.mu.Unlock()
		users, err := g.fetch(ctx, group)
		g.mu.Lock()
		e.users, e.err, e.expires = users, err, g.now().Add(g.ttl)
		close(e.done)
		g.mu.Unlock()
		return users, err
	}
	g.mu.Unlock()
	select {
	case <-e.done:
		return e.users, e.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
