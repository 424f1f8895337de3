package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"sync"
	"time"

	"github.com/airlockhq/airlock/adapters/discord"
	"github.com/airlockhq/airlock/adapters/shell"
	"github.com/airlockhq/airlock/adapters/slack"
	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/config"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/events"
	"github.com/airlockhq/airlock/jobs"
	"github.com/airlockhq/airlock/mcptools"
	"github.com/airlockhq/airlock/metrics"
	"github.com/airlockhq/airlock/model"
	"github.com/airlockhq/airlock/model/gemini"
	"github.com/airlockhq/airlock/model/openai"
	"github.com/airlockhq/airlock/redact"
	"github.com/airlockhq/airlock/storage"
	"github.com/airlockhq/airlock/telemetry"
	"github.com/airlockhq/airlock/tools"
)

const usage = `airlock: an approval gate between an LLM agent and its tools.

Usage:
  airlock run          -config FILE   run the configured platforms and the HTTP endpoints
  airlock chat         -config FILE   talk to the agent in this terminal (shell adapter)
  airlock check-config -config FILE   validate the config; exits non-zero naming the bad key
  airlock migrate      -config FILE   apply the database migrations
  airlock discord-invite -config FILE print the Discord install URL with the permissions the bot needs
  airlock audit        -config FILE [-conversation ID] [-since DURATION] [-json]
                                      who asked, the exact arguments, who decided, when, and the outcome of every call
  airlock events       -config FILE [-dead]    webhook deliveries not yet accepted, or the dead ones
  airlock events retry ID -config FILE         send a dead delivery again
  airlock tools        -config FILE          every tool the model is offered, its source, and whether and why it needs approval
  airlock grants       -config FILE [-active]   list grants ("Allow for" approvals of a tool in a thread)
  airlock grants revoke -config FILE ID        revoke a grant
  airlock soak         [-storms N] [-clicks N] [-driver sqlite|postgres -dsn DSN]
                                      repeat a storm of concurrent clicks on one button; every storm must run the tool once
  airlock bench        [-cards N] [-clickers N] [-driver sqlite|postgres -dsn DSN] [-json] [-cpuprofile F] [-memprofile F]
                                      measure click acks, decisions/s and memory per card against fakes, with baselines
  airlock health       [-url URL]     GET URL (default http://127.0.0.1:8080/readyz); exit 0 on 2xx, else 1 with the reason
`

// run is the whole program; main only wires the process to it.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, usage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd := args[0]
	switch cmd {
	case "audit":
		return audit(ctx, args[1:], stdout, stderr)
	case "soak":
		return soak(ctx, args[1:], stdout, stderr)
	case "bench":
		return bench(ctx, args[1:], stdout, stderr)
	case benchServerCmd:
		return benchServer(ctx, args[1:], stdin, stdout, stderr)
	case "grants":
		return grants(ctx, args[1:], stdout, stderr)
	case "tools":
		return listTools(ctx, args[1:], stdout, stderr)
	case "events":
		return eventsCmd(ctx, args[1:], stdout, stderr)
	case "health":
		return health(ctx, args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("airlock "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "airlock.yaml", "path to the config file")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if cmd == "chat" {
		// The terminal belongs to the conversation; only warnings go to stderr.
		logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	switch cmd {
	case "run", "chat", "check-config", "migrate", "discord-invite":
	default:
		fmt.Fprintf(stderr, "airlock: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		fmt.Fprintf(stderr, "airlock: %v\n", err)
		return 1
	}
	if cmd != "chat" {
		logger = newLogger(stderr, cfg.Log)
	}
	// No log line carries a secret: the config's ${ENV} values, and their
	// encodings, are scrubbed from every record (MCP servers' stderr too).
	secrets := redact.New(cfg.Secrets())
	logger = slog.New(redact.NewHandler(logger.Handler(), secrets))
	var runErr error
	switch cmd {
	case "check-config":
		fmt.Fprintf(stdout, "%s: ok\n", *cfgPath)
		return 0
	case "migrate":
		runErr = migrate(ctx, cfg, stdout)
	case "discord-invite":
		if cfg.Discord == nil {
			fmt.Fprintln(stderr, "airlock: discord: the config has no discord section")
			return 1
		}
		u, err := discord.Invite(ctx, discord.Config{Token: cfg.Discord.Token, APIURL: cfg.Discord.APIURL}, cfg.Discord.ModerationTools)
		if err != nil {
			fmt.Fprintf(stderr, "airlock: discord.token: %v\n", err)
			return 1
		}
		fmt.Fprintln(stdout, u)
		return 0
	case "chat":
		runErr = chat(ctx, cfg, logger, stdin, stdout)
	case "run":
		runErr = serve(ctx, cfg, logger)
	}
	if runErr != nil && !errors.Is(runErr, context.Canceled) {
		fmt.Fprintf(stderr, "airlock: %s\n", secrets.String(runErr.Error()))
		return 1
	}
	return 0
}

func migrate(ctx context.Context, cfg *config.Config, stdout io.Writer) error {
	db, err := storage.Open(ctx, cfg.Storage.Driver, cfg.Storage.DSN)
	if err != nil {
		return err
	}
	defer db.Close()
	fmt.Fprintf(stdout, "migrations applied (%s)\n", cfg.Storage.Driver)
	return nil
}

// app is the wired program.
type app struct {
	store   *storage.DB
	bot     *bot.Bot
	tools   *tools.Set
	metrics *metrics.Metrics
	// flushTraces exports the spans still buffered; call it last.
	flushTraces func(context.Context) error
	// mcp holds the MCP servers' connections; nil without mcp_servers.
	mcp *mcptools.Manager
}

func build(ctx context.Context, cfg *config.Config, logger *slog.Logger, extraChannels ...bot.Channel) (*app, error) {
	if !cfg.Confirmation.FlagHonoured() {
		logger.Warn("confirmation.enabled is false: the tools' confirm flag is not honoured; only confirmation.tools are gated")
	}
	// One redactor of the config's ${ENV} values scrubs what tools return
	// (before their cap), what the bot shows, audits and sends, and what
	// storage writes for audit and webhooks.
	secrets := redact.New(cfg.Secrets())
	set, err := tools.New(cfg.Tools, tools.Options{Redactor: secrets})
	if err != nil {
		return nil, err
	}
	provider, err := newProvider(ctx, cfg.Model)
	if err != nil {
		return nil, err
	}
	// MCP servers connect concurrently; their tools join the set before
	// anything else runs (recovery and clicks need them), at most 15 s.
	mcp, err := startMCP(ctx, cfg, set, logger)
	if err != nil {
		return nil, err
	}
	db, err := storage.Open(ctx, cfg.Storage.Driver, cfg.Storage.DSN, storage.WithScrub(secrets.String))
	if err != nil {
		return nil, err
	}
	m := metrics.New(func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		n, err := db.PendingApprovals(ctx)
		if err != nil {
			logger.Warn("metrics: count pending approvals", "err", err)
		}
		return float64(n)
	})
	provider = m.Provider(provider, cfg.Model.Provider)
	tp, flushTraces, err := telemetry.Setup(ctx, cfg.Telemetry)
	if err != nil {
		db.Close()
		return nil, err
	}
	tracer := tp.Tracer(telemetry.TracerName)
	provider = telemetry.Provider(provider, tracer, cfg.Model.Provider, cfg.Model.Name)
	if err := db.SetWebhooks(cfg.Events.Targets()); err != nil {
		db.Close()
		return nil, err
	}
	if db.Driver() == storage.DriverSQLite {
		if err := db.ClearLeases(ctx); err != nil {
			db.Close()
			return nil, err
		}
	}
	var entries []bot.Channel
	for _, ch := range cfg.Channels {
		entries = append(entries, bot.Channel{
			Platform: ch.Platform, ID: ch.ID,
			Approvers: ch.Approvers, ApproverGroups: ch.ApproverGroups, ApproverRoles: ch.ApproverRoles,
			Requesters: ch.Requesters, RequesterGroups: ch.RequesterGroups, RequesterRoles: ch.RequesterRoles,
			Tools:            ch.Tools,
			ApprovalsChannel: ch.ApprovalsChannel, Notify: ch.Notify,
		})
	}
	var escalation []bot.EscalationStep
	for _, st := range cfg.Confirmation.Escalation {
		escalation = append(escalation, bot.EscalationStep{
			After:     st.After,
			Mention:   st.MentionSet(),
			Approvers: st.ApproverSet(),
		})
	}
	entries = append(entries, extraChannels...)
	// Every expiry, claim and lease compares against the database's clock,
	// so replicas with skewed clocks agree.
	if err := db.SyncClock(ctx); err != nil {
		db.Close()
		return nil, err
	}
	host, _ := os.Hostname()
	b, err := bot.New(bot.Config{
		Store:              db,
		Model:              provider,
		Tools:              set,
		Policy:             confirm.NewPolicy(cfg.Confirmation.FlagHonoured(), cfg.Confirmation.Tools, cfg.Confirmation.RuleSet()),
		DefaultApprovals:   cfg.Confirmation.Approvals,
		SelfApproval:       cfg.Confirmation.SelfApproval,
		GrantFor:           cfg.Confirmation.Grants.For(),
		Channels:           bot.NewChannels(entries),
		SystemPrompt:       cfg.Model.SystemPrompt,
		MaxToolRounds:      cfg.Model.MaxToolRounds,
		MaxCallsPerReply:   cfg.Model.MaxCallsPerReply,
		MaxHistoryMessages: cfg.Model.MaxHistoryMessages,
		MaxMessageChars:    cfg.Model.MaxMessageChars,
		Timeout:            cfg.Confirmation.Timeout,
		RemindBefore:       cfg.Confirmation.Reminder(),
		Escalation:         escalation,
		SingleProcess:      db.Driver() == storage.DriverSQLite,
		TurnsPerMinute:     cfg.Limits.Turns(),
		PendingPerChannel:  cfg.Limits.Pending(),
		Redact:             secrets.String,
		Metrics:            m,
		Tracer:             tracer,
		Now:                db.Clock(),
		Logger:             logger,
		WorkerID:           fmt.Sprintf("%s/%d", host, os.Getpid()),
		Trace:              crashTrace,
	})
	if err != nil {
		db.Close()
		return nil, err
	}
	return &app{store: db, bot: b, tools: set, metrics: m, flushTraces: flushTraces, mcp: mcp}, nil
}

func newProvider(ctx context.Context, m config.Model) (model.Provider, error) {
	var (
		p   model.Provider
		err error
	)
	client := &http.Client{Timeout: 5 * time.Minute, Transport: tools.KeepAliveTransport()}
	switch m.Provider {
	case "gemini":
		p, err = gemini.New(ctx, gemini.Config{APIKey: m.APIKey, BaseURL: m.BaseURL, Model: m.Name, HTTPClient: client})
	case "openai":
		p, err = openai.New(openai.Config{APIKey: m.APIKey, BaseURL: m.BaseURL, Model: m.Name, HTTPClient: client})
	default:
		err = fmt.Errorf("model.provider: %q is not one of gemini, openai", m.Provider)
	}
	if err != nil {
		return nil, err
	}
	// Rate limits: honour the server's delay (capped at 60 s a wait, 3 min
	// in all); the thread is told while a turn waits.
	return model.WithRetryPolicy(p, model.RetryPolicy{}), nil
}

func chat(ctx context.Context, cfg *config.Config, logger *slog.Logger, stdin io.Reader, stdout io.Writer) error {
	sh := shell.New(stdin, stdout)
	// One local person types here: no per-user turn rate applies, and
	// they approve their own calls (there is nobody else).
	local := *cfg
	noLimit := 0
	local.Limits.TurnsPerMinute = &noLimit
	local.Confirmation.SelfApproval = true
	a, err := build(ctx, &local, logger, bot.Channel{Platform: shell.Platform, ID: sh.Channel, Approvers: []string{sh.User}})
	if err != nil {
		return err
	}
	defer a.close()
	defer a.flush(logger)
	a.bot.Register(shell.Platform, sh)
	sh.Greet() // before recovery, which may already talk in the thread
	if err := a.bot.Recover(ctx); err != nil {
		return err
	}
	sweepCtx, stopSweep := context.WithCancel(ctx)
	defer stopSweep()
	go a.bot.Run(sweepCtx, time.Second)
	return sh.Run(ctx, a.bot)
}

func serve(ctx context.Context, cfg *config.Config, logger *slog.Logger) error {
	a, err := build(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer a.close()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	defer wg.Wait()
	// A platform that stops on its own stops the process, with its error.
	run := func(name string, fn func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(ctx); err != nil && ctx.Err() == nil {
				cancel(fmt.Errorf("%s: %w", name, err))
			}
		}()
	}
	if cfg.Slack == nil && cfg.Discord == nil {
		logger.Warn("no chat platform is configured (slack, discord): only the HTTP endpoints run; use airlock chat for the terminal")
	}
	routes := map[string]http.Handler{}
	if err := startPlatforms(ctx, cfg, a, logger, routes, run); err != nil {
		return err
	}
	// Platforms are registered (and their tools added) before recovery,
	// so recovered work can post and run.
	if err := a.bot.Recover(ctx); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	routes["GET /metrics"] = a.metrics.Handler()
	if cfg.Debug.Pprof {
		logger.Warn("debug.pprof is on: /debug/pprof/ is served on listen; keep it off the public internet")
		routes["/debug/pprof/"] = http.HandlerFunc(pprof.Index)
		routes["/debug/pprof/profile"] = http.HandlerFunc(pprof.Profile)
		routes["/debug/pprof/trace"] = http.HandlerFunc(pprof.Trace)
		routes["/debug/pprof/symbol"] = http.HandlerFunc(pprof.Symbol)
		routes["/debug/pprof/cmdline"] = http.HandlerFunc(pprof.Cmdline)
	}
	srv := newHTTPServer(httpHandler(a.store, routes), defaultHTTPLimits)
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			cancel(fmt.Errorf("http server: %w", err))
		}
	}()
	logger.Info("airlock running", "listen", ln.Addr().String(), "slack", cfg.Slack != nil, "discord", cfg.Discord != nil)
	background, err := a.backgroundJobs(cfg, logger)
	if err != nil {
		return err
	}
	wg.Add(1)
	go func() { defer wg.Done(); _ = background.Run(ctx) }()
	<-ctx.Done()
	// Stop taking turns and clicks; let started work (tool runs) finish
	// for up to shutdown_timeout. What is cut off is recovered at the next
	// start (a run found running becomes unknown, never repeated).
	logger.Info("shutting down", "shutdown_timeout", cfg.ShutdownTimeout)
	drain, stopDrain := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer stopDrain()
	if err := a.bot.Shutdown(drain); err != nil {
		logger.Warn("work still running at the shutdown timeout; it is recovered at the next start", "err", err)
	}
	a.flush(logger)
	shutdown, stop := context.WithTimeout(context.Background(), 5*time.Second)
	defer stop()
	_ = srv.Shutdown(shutdown)
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return nil
}

// startPlatforms connects the configured chat platforms, registers them
// with the bot, adds their built-in tools and HTTP routes, and starts them
// with run.
func startPlatforms(ctx context.Context, cfg *config.Config, a *app, logger *slog.Logger, routes map[string]http.Handler, run func(string, func(context.Context) error)) error {
	if s := cfg.Slack; s != nil {
		sa, err := slack.New(slack.Config{
			Mode: s.Mode, BotToken: s.BotToken, AppToken: s.AppToken, SigningSecret: s.SigningSecret,
			APIURL: s.APIURL, Logger: logger, Metrics: a.metrics,
		}, a.bot, a.store)
		if err != nil {
			return fmt.Errorf("slack: %w", err)
		}
		if err := sa.Start(ctx); err != nil {
			return fmt.Errorf("slack: %w", err)
		}
		a.bot.Register(slack.Platform, sa)
		if s.Mode == "http" {
			routes["/slack/events"] = sa.Handler()
		}
		run("slack", sa.Run)
	}
	if d := cfg.Discord; d != nil {
		da, err := discord.New(discord.Config{Token: d.Token, APIURL: d.APIURL, Logger: logger.With("platform", "discord"), Events: a.store, Metrics: a.metrics}, a.bot)
		if err != nil {
			return fmt.Errorf("discord: %w", err)
		}
		a.bot.Register(discord.Platform, da)
		mods, err := discord.ModerationTools(d.ModerationTools, da.Session())
		if err != nil {
			return fmt.Errorf("discord: %w", err)
		}
		for _, t := range mods {
			if err := a.tools.Add(t); err != nil {
				return fmt.Errorf("discord.moderation_tools: %w", err)
			}
		}
		run("discord", da.Run)
	}
	return nil
}

// startMCP connects the configured MCP servers and waits until each has
// listed its tools or failed its first attempt (at most 15 s).
func startMCP(ctx context.Context, cfg *config.Config, set *tools.Set, logger *slog.Logger) (*mcptools.Manager, error) {
	if len(cfg.MCPServers) == 0 {
		return nil, nil
	}
	m := mcptools.Start(ctx, cfg.MCPServers, set, logger.With("component", "mcp"), mcptools.WithRedactor(redact.New(cfg.Secrets())))
	if err := m.WaitReady(ctx); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// close stops what build started that outlives a command: the MCP
// servers' connections and processes, and the database.
func (a *app) close() {
	if a.mcp != nil {
		a.mcp.Close()
	}
	a.store.Close()
}

// flush exports the traces still buffered, for a few seconds at most.
func (a *app) flush(logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.flushTraces(ctx); err != nil {
		logger.Warn("flush traces", "err", err)
	}
}

// newLogger builds the process's logger from the `log` section.
func newLogger(w io.Writer, l config.Log) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(l.Level)) // validated by config
	opts := &slog.HandlerOptions{Level: level}
	if l.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// backgroundJobs is the process's background work, one runner of named
// jobs: the bot's (sweep, escalate, recover, prune_events), clock_sync
// (the database clock's offset re-measured every minute, so a drifting
// local clock never shifts expiry or leases) and, with webhooks, their
// delivery. Their metrics join /metrics.
func (a *app) backgroundJobs(cfg *config.Config, logger *slog.Logger) (*jobs.Runner, error) {
	all := a.bot.Jobs(time.Second)
	all = append(all, jobs.Job{Name: "clock_sync", Every: time.Minute, Timeout: 30 * time.Second, Run: a.store.SyncClock})
	if len(cfg.Events.Webhooks) > 0 {
		host, _ := os.Hostname()
		d := events.NewDeliverer(a.store, cfg.Events.Webhooks, events.Options{Worker: fmt.Sprintf("%s/%d", host, os.Getpid()), Logger: logger, Metrics: a.metrics})
		all = append(all, d.Job())
	}
	r := jobs.New(jobs.Options{Logger: logger, Registerer: a.metrics.Registerer()})
	for _, j := range all {
		if err := r.Add(j); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// httpLimits bound what one client can hold: a slow or endless client
// cannot keep a connection or grow memory (Slack posts small JSON bodies,
// probes are tiny).
type httpLimits struct {
	ReadHeader, Read, Write, Idle time.Duration
	MaxHeaderBytes                int
}

var defaultHTTPLimits = httpLimits{
	ReadHeader:     10 * time.Second,
	Read:           30 * time.Second,
	Write:          30 * time.Second,
	Idle:           120 * time.Second,
	MaxHeaderBytes: 64 << 10,
}

func newHTTPServer(h http.Handler, l httpLimits) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: l.ReadHeader,
		ReadTimeout:       l.Read,
		WriteTimeout:      l.Write,
		IdleTimeout:       l.Idle,
		MaxHeaderBytes:    l.MaxHeaderBytes,
	}
}

// crashTrace is nil in real builds; the crashtest build tag sets it so
// tests can kill the process at a named point of the confirmation path.
var crashTrace func(point string)

// pinger is what readiness needs from storage.
type pinger interface {
	Ping(ctx context.Context) error
}

func httpHandler(db pinger, routes map[string]http.Handler) http.Handler {
	mux := http.NewServeMux()
	for pattern, h := range routes {
		mux.Handle(pattern, h)
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := db.Ping(ctx); err != nil {
			http.Error(w, "database unavailable", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	return mux
}
