package bench

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/airlockhq/airlock/adapters/slack"
	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/gateway"
	"github.com/airlockhq/airlock/jobs"
	airmetrics "github.com/airlockhq/airlock/metrics"
	"github.com/airlockhq/airlock/storage"
)

// ServerCommand is the hidden command airlock-lab bench starts its own
// executable as: the Airlock side of the bench, in a process of its own
// so that what the bench measures of it (resident memory, CPU) is
// Airlock's alone, not the fake Slack's or the clickers'.
const ServerCommand = "bench-server"

// ServerEnv is set in the environment of the bench's server process:
// bench-server runs only with it, and a test binary started as one (see
// cmd/airlock-lab's TestMain) runs it instead of the tests.
const ServerEnv = "AIRLOCK_BENCH_SERVER"

// serverHello is the first line the bench server prints on stdout, once
// it serves: its listeners' base URLs.
type serverHello struct {
	Events string `json:"events"` // Airlock's HTTP server (/slack/events, /metrics)
	Bare   string `json:"bare"`   // the bare net/http handler, the ack baseline
}

// Server is bench-server. It runs Airlock against the bench's fake Slack
// Web API (-slack) with an instant model and an instant gated tool, as
// airlock run wires it, plus a bare handler. The bench asks it for its
// figures over its stdin and stdout, one JSON line each way (see
// control); it stops when stdin is closed (the bench is done, or gone).
func Server(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, h HTTP) int {
	fs := flag.NewFlagSet("airlock "+ServerCommand, flag.ContinueOnError)
	fs.SetOutput(stderr)
	driver := fs.String("driver", storage.DriverSQLite, "sqlite or postgres")
	dsn := fs.String("dsn", "", "the database")
	slackAPI := fs.String("slack", "", "the fake Slack Web API's base URL")
	workers := fs.Int("workers", 0, "the Slack adapter's workers")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if os.Getenv(ServerEnv) == "" {
		// Not for use on its own: it would recover whatever database it is
		// given with the bench's tool, and answer to the bench's secret.
		fmt.Fprintln(stderr, "airlock bench-server: only airlock bench starts it")
		return 2
	}
	if *dsn == "" || *slackAPI == "" || stdin == nil {
		fmt.Fprintln(stderr, "airlock bench-server: -dsn and -slack are required (it is started by airlock bench)")
		return 2
	}
	in, err := startInstance(ctx, *driver, *dsn, *slackAPI, *workers, serverLogger(stderr), instanceOptions{})
	if err == nil {
		err = in.serve(ctx, stdin, stdout, h)
		in.close()
	}
	if err != nil {
		fmt.Fprintf(stderr, "airlock bench-server: %v\n", err)
		return 1
	}
	return 0
}

// serve serves Airlock's HTTP server and the bare handler, announces
// them on stdout and answers the bench's requests until stdin ends.
func (in *instance) serve(ctx context.Context, stdin io.Reader, stdout io.Writer, h HTTP) error {
	routes := map[string]http.Handler{"/slack/events": in.sa.Handler(), "GET /metrics": in.metrics.Handler()}
	airSrv, airURL, err := serve(h, stamped(h.Handler(in.db, routes)))
	if err != nil {
		return err
	}
	defer airSrv.Close()
	bareSrv, bareURL, err := serve(h, stamped(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
	})))
	if err != nil {
		return err
	}
	defer bareSrv.Close()

	enc := json.NewEncoder(stdout)
	if err := enc.Encode(serverHello{Events: airURL, Bare: bareURL}); err != nil {
		return err
	}
	ctl := &control{db: in.db, sa: in.sa, tool: in.tool}
	defer ctl.stopCPU()
	return ctl.answer(ctx, stdin, enc)
}

// instance is Airlock as the bench runs it: the bot and the Slack adapter
// in HTTP mode on real storage, their background work running until
// close.
type instance struct {
	db      *storage.DB
	sa      *slack.Adapter
	tool    *countingTool
	bot     *bot.Bot
	metrics *airmetrics.Metrics
	stop    context.CancelFunc
	bg      sync.WaitGroup
}

// instanceOptions add to the bench's Airlock: gateway clients, and a tool
// set of its own instead of the counting tool.
type instanceOptions struct {
	gateway gateway.Config
	tools   bot.Tools
}

func startInstance(ctx context.Context, driver, dsn, slackAPI string, workers int, logger *slog.Logger, o instanceOptions) (*instance, error) {
	db, err := storage.Open(ctx, driver, dsn)
	if err != nil {
		return nil, err
	}
	in := &instance{db: db, tool: &countingTool{runs: map[string]int{}}, metrics: airmetrics.New(nil)}
	runCtx, stop := context.WithCancel(ctx)
	in.stop = stop
	if err := in.start(runCtx, slackAPI, workers, logger, o); err != nil {
		in.close()
		return nil, err
	}
	return in, nil
}

// start wires the bot and the adapter as airlock run does and starts
// their background work.
func (in *instance) start(ctx context.Context, slackAPI string, workers int, logger *slog.Logger, o instanceOptions) error {
	if err := in.db.SyncClock(ctx); err != nil {
		return err
	}
	var set bot.Tools = toolSet{in.tool}
	if o.tools != nil {
		set = o.tools
	}
	b, err := bot.New(bot.Config{
		SingleProcess: in.db.Driver() == storage.DriverSQLite,
		Store:         in.db,
		Model:         in.metrics.Provider(instantModel{}, "bench"),
		Tools:         set,
		Policy:        confirm.NewPolicy(true, nil),
		Channels:      bot.NewChannels([]bot.Channel{{Platform: slack.Platform, ID: "*", Approvers: []string{approver}}}),
		Metrics:       in.metrics,
		Now:           in.db.Clock(),
		Logger:        logger,
		WorkerID:      fmt.Sprintf("bench/%d", os.Getpid()),
		Gateway:       o.gateway,
		// The per-person and per-channel limits guard the turn path,
		// not decisions: off, so one requester can make every card.
	})
	if err != nil {
		return err
	}
	in.bot = b
	in.sa, err = slack.New(slack.Config{
		Mode: slack.ModeHTTP, BotToken: "xoxb-bench", SigningSecret: signingSecret, APIURL: slackAPI + "/api/", Logger: logger,
		Workers: workers, Metrics: in.metrics,
	}, b, in.db)
	if err != nil {
		return err
	}
	if err := in.sa.Start(ctx); err != nil {
		return err
	}
	b.Register(slack.Platform, in.sa)
	in.bg.Go(func() { _ = in.sa.Run(ctx) })
	// The background jobs airlock run runs: the bot's and storage's.
	r := jobs.New(jobs.Options{Logger: logger})
	for _, j := range append(b.Jobs(time.Second), in.db.Jobs()...) {
		if err := r.Add(j); err != nil {
			return err
		}
	}
	in.bg.Go(func() { _ = r.Run(ctx) })
	return nil
}

// close stops the background work, waits for it and closes the storage.
func (in *instance) close() {
	in.stop()
	in.bg.Wait()
	in.db.Close()
}

// serverLogger writes logs as airlock run writes them (info, text), to
// nowhere; warnings and errors also to stderr.
func serverLogger(stderr io.Writer) *slog.Logger {
	return slog.New(logTee{
		all:  slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}),
		warn: slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}),
	})
}

// logTee formats every record at info and up, as airlock run does, and
// also writes warnings and errors to stderr.
type logTee struct{ all, warn slog.Handler }

func (h logTee) Enabled(ctx context.Context, l slog.Level) bool {
	return h.all.Enabled(ctx, l)
}
func (h logTee) Handle(ctx context.Context, r slog.Record) error {
	if h.warn.Enabled(ctx, r.Level) {
		_ = h.warn.Handle(ctx, r.Clone())
	}
	return h.all.Handle(ctx, r)
}
func (h logTee) WithAttrs(as []slog.Attr) slog.Handler {
	return logTee{all: h.all.WithAttrs(as), warn: h.warn.WithAttrs(as)}
}
func (h logTee) WithGroup(g string) slog.Handler {
	return logTee{all: h.all.WithGroup(g), warn: h.warn.WithGroup(g)}
}

// startHeader carries, in the bench's servers' answers, when the handler
// started on the request (Unix nanoseconds).
const startHeader = "X-Airlock-Bench-Handler-Start"

// stamped adds startHeader to h's answers: the bench splits a click's
// latency into the wait before the handler and the rest.
func stamped(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(startHeader, strconv.FormatInt(time.Now().UnixNano(), 10))
		h.ServeHTTP(w, r)
	})
}
