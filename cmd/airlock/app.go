package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlockhq/airlock/adapters/discord"
	"github.com/airlockhq/airlock/adapters/shell"
	"github.com/airlockhq/airlock/adapters/slack"
	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/cmd/internal/httpserver"
	"github.com/airlockhq/airlock/config"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/events"
	"github.com/airlockhq/airlock/gateway"
	"github.com/airlockhq/airlock/jobs"
	"github.com/airlockhq/airlock/mcpserver"
	"github.com/airlockhq/airlock/mcptools"
	"github.com/airlockhq/airlock/metrics"
	"github.com/airlockhq/airlock/model"
	"github.com/airlockhq/airlock/model/gemini"
	"github.com/airlockhq/airlock/model/openai"
	"github.com/airlockhq/airlock/redact"
	"github.com/airlockhq/airlock/storage"
	"github.com/airlockhq/airlock/telemetry"
	"github.com/airlockhq/airlock/tools"
	"github.com/airlockhq/airlock/web"
)

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
	if cfg.Model.Off() {
		logger.Warn("model: off (model.api_key is empty): free text is answered with a line saying so; runbooks work")
	}
	// MCP servers connect concurrently; their tools join the set before
	// anything else runs (recovery and clicks need them), at most 15 s.
	asker := &lateAsker{}
	mcp, err := startMCP(ctx, cfg, set, logger, asker)
	if err != nil {
		return nil, err
	}
	checkRunbookTools(cfg, set, logger)
	for _, w := range missingPrograms(cfg) {
		logger.Warn(w)
	}
	db, err := storage.Open(ctx, cfg.Storage.Driver, cfg.Storage.DSN, storage.WithScrub(secrets.String), storage.WithAuditKey(cfg.Audit.Key()))
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
	// A chain head Airlock did not write: recorded in the audit (and its
	// webhook event) by storage; here, the log and the metric.
	db.OnAuditAlarm(func(a storage.AuditAlarm) {
		logger.Error("audit: the chain's head was a row Airlock did not write; it was chained around (README \"Audit\")",
			"row", a.Row, "chained_to", a.ChainedTo, "alarm_row", a.AlarmRow, "why", a.Why)
		m.AuditForeignHead()
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
			Runbooks:         ch.Runbooks,
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
		StepUp:             cfg.Confirmation.StepUpSet(),
		ConsoleURL:         cfg.Web.BaseURL,
		ModelOff:           cfg.Model.Off(),
		GrantFor:           cfg.Confirmation.Grants.For(),
		Channels:           bot.NewChannels(entries),
		Runbooks:           cfg.RunbookSet(),
		StepSecret:         cfg.StepSecret,
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
		Gateway:            cfg.Gateway,
	})
	if err != nil {
		db.Close()
		return nil, err
	}
	asker.b.Store(b)
	return &app{store: db, bot: b, tools: set, metrics: m, flushTraces: flushTraces, mcp: mcp}, nil
}

// lateAsker hands the MCP servers' questions to the bot, which is built
// after the servers connect (their tools join the set it is built with);
// a question before that is declined.
type lateAsker struct{ b atomic.Pointer[bot.Bot] }

func (l *lateAsker) Ask(ctx context.Context, q confirm.Elicitation) confirm.ElicitAnswer {
	if b := l.b.Load(); b != nil {
		return b.Ask(ctx, q)
	}
	return confirm.ElicitAnswer{Action: confirm.ElicitDecline}
}

func newProvider(ctx context.Context, m config.Model) (model.Provider, error) {
	var (
		p   model.Provider
		err error
	)
	if m.Off() {
		return model.Off{}, nil
	}
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

// chat is airlock chat: the terminal adapter on stdin and stdout. Its log
// goes to logPath ("": stderr), never into the conversation; the
// greeting says where, and that the model is off when it is.
func chat(ctx context.Context, cfg *config.Config, logger *slog.Logger, stdin io.Reader, stdout io.Writer, logPath string) error {
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
	if logPath != "" {
		sh.Note("Logs go to " + logPath + " (-log FILE to choose another).")
	}
	if cfg.Model.Off() {
		sh.Note(model.OffReply)
	}
	for _, w := range missingPrograms(cfg) {
		sh.Note("Warning: " + w + ".")
	}
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
	if len(cfg.Gateway.Clients) > 0 {
		api := (&gateway.API{Config: cfg.Gateway, Approvals: a.bot.Gateway(), Metrics: a.metrics, Now: time.Now}).Handler()
		routes["/v1/approvals"] = api
		routes["/v1/approvals/"] = api
		if cfg.Gateway.MCP.Path != "" {
			srv := &mcpserver.Server{Config: cfg.Gateway, Tools: a.bot.MCP(), Metrics: a.metrics, Logger: logger}
			routes[cfg.Gateway.MCP.Path] = srv.Handler()
		}
	}
	if cfg.Web.On() {
		console, err := web.New(web.Options{Config: cfg.Web, Console: a.bot, Store: a.store, Audit: a.store, Log: logger.With("component", "web"), Say: bot.UserMessage})
		if err != nil {
			return err
		}
		routes["/ui/"] = console.Handler()
	}
	if cfg.Debug.Pprof {
		logger.Warn("debug.pprof is on: /debug/pprof/ is served on listen; keep it off the public internet")
		routes["/debug/pprof/"] = http.HandlerFunc(pprof.Index)
		routes["/debug/pprof/profile"] = http.HandlerFunc(pprof.Profile)
		routes["/debug/pprof/trace"] = http.HandlerFunc(pprof.Trace)
		routes["/debug/pprof/symbol"] = http.HandlerFunc(pprof.Symbol)
		routes["/debug/pprof/cmdline"] = http.HandlerFunc(pprof.Cmdline)
	}
	srv := httpserver.New(httpserver.Handler(a.store, routes), httpserver.DefaultLimits)
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
			APIURL: s.APIURL, Logger: logger, Metrics: a.metrics, Trace: crashTrace, Home: a.bot,
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
// listed its tools or failed its first attempt (at most 15 s). With an
// asker, their questions (elicitation) go to it; without, they are asked
// none (the commands that only list tools).
func startMCP(ctx context.Context, cfg *config.Config, set *tools.Set, logger *slog.Logger, asker mcptools.Asker) (*mcptools.Manager, error) {
	if len(cfg.MCPServers) == 0 {
		return nil, nil
	}
	opts := []mcptools.Option{mcptools.WithRedactor(redact.New(cfg.Secrets()))}
	if asker != nil {
		opts = append(opts, mcptools.WithAsker(asker))
	}
	m := mcptools.Start(ctx, cfg.MCPServers, set, logger.With("component", "mcp"), opts...)
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

// JobClockSync names the job that measures the database clock's offset
// again (the job label of airlock_job_seconds).
const JobClockSync = "clock-sync"

// backgroundJobs is the process's background work, one runner of named
// jobs: the bot's (sweep, escalate, recover, prune-events), storage's
// (wal-checkpoint on SQLite), clock-sync
// (the database clock's offset re-measured every minute, so a drifting
// local clock never shifts expiry or leases) and, with webhooks, their
// delivery (and the gateway clients' callbacks'), and with audit.signing_key the audit's (auditJobs). Their
// metrics join /metrics.
func (a *app) backgroundJobs(cfg *config.Config, logger *slog.Logger) (*jobs.Runner, error) {
	all := append(a.bot.Jobs(time.Second), a.store.Jobs()...)
	all = append(all, jobs.Job{Name: JobClockSync, Every: time.Minute, Timeout: 30 * time.Second, Run: a.store.SyncClock})
	all = append(all, auditJobs(cfg.Audit, a.store)...)
	var callbacks []gateway.Client
	for _, c := range cfg.Gateway.Clients {
		if c.CallbackSecret != "" {
			callbacks = append(callbacks, c)
		}
	}
	if len(cfg.Events.Webhooks) > 0 || len(callbacks) > 0 {
		host, _ := os.Hostname()
		d := events.NewDeliverer(a.store, cfg.Events.Webhooks, events.Options{Worker: fmt.Sprintf("%s/%d", host, os.Getpid()), Logger: logger,
			Metrics: a.metrics, Callbacks: callbacks})
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

// crashTrace is nil in real builds; the crashtest build tag sets it so
// tests can kill the process at a named point of the confirmation path.
var crashTrace func(point string)
