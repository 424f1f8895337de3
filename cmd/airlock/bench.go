package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/airlockhq/airlock/adapters/slack"
	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/confirm"
	airmetrics "github.com/airlockhq/airlock/metrics"
	"github.com/airlockhq/airlock/model"
	"github.com/airlockhq/airlock/storage"
	"github.com/airlockhq/airlock/tools"
)

// bench measures the decision path end to end, in one process, against
// fakes on 127.0.0.1: a fake Slack Web API, an instant model and an
// instant tool, with the real Slack adapter in HTTP mode behind the real
// HTTP server on a real listener, and real storage (SQLite in a temporary
// file, or PostgreSQL in a fresh schema). It creates -cards cards (one
// mention each, -clickers at a time), then -clickers concurrent clickers
// POST one signed Allow click per card. It reports the clicks' ack
// latency as the client sees it, decisions finished per second (until
// every batch is done and the model's answer posted), and memory per
// pending card; and, in the same run, the baselines they are judged
// against: a bare net/http handler answering the same requests from the
// same client, and raw commits per second of the database with the same
// settings. Every decision must run its tool exactly once.
func bench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("airlock bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := benchOptions{}
	fs.IntVar(&o.cards, "cards", 2000, "cards to create and decide")
	fs.IntVar(&o.clickers, "clickers", 50, "concurrent clickers (and card creators)")
	fs.StringVar(&o.driver, "driver", "sqlite", "sqlite or postgres")
	fs.StringVar(&o.dsn, "dsn", "", "postgres: the server (a fresh schema is made in it and dropped after); sqlite: a file (default: a new file in a temporary folder)")
	fs.BoolVar(&o.json, "json", false, "print the report as JSON")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of the decision phase (the clicks until every batch is done) to this file")
	fs.StringVar(&o.memprofile, "memprofile", "", "write a heap profile taken with every card pending to this file")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "give up after this long")
	fs.IntVar(&o.workers, "workers", 0, "the Slack adapter's workers (default: its default, slack.DefaultConcurrency)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if o.cards < 1 || o.clickers < 1 || o.cards > maxBenchCards {
		fmt.Fprintf(stderr, "airlock bench: -cards must be 1 to %d and -clickers positive\n", maxBenchCards)
		return 2
	}
	switch o.driver {
	case storage.DriverSQLite:
	case storage.DriverPostgres:
		if o.dsn == "" {
			fmt.Fprintln(stderr, "airlock bench: -dsn is required for postgres")
			return 2
		}
	default:
		fmt.Fprintf(stderr, "airlock bench: -driver %q is not one of sqlite, postgres\n", o.driver)
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	rep, err := runBench(ctx, o, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "airlock bench: %v\n", err)
		return 1
	}
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
	} else {
		rep.print(stdout)
	}
	if !rep.ExactlyOnce {
		return 1
	}
	return 0
}

// maxBenchCards keeps each card's thread ts within Slack's 6 digits.
const maxBenchCards = 999_999

type benchOptions struct {
	cards, clickers        int
	driver, dsn            string
	json                   bool
	cpuprofile, memprofile string
	timeout                time.Duration
	workers                int
}

// BenchReport is what airlock bench prints (-json: as is).
type BenchReport struct {
	Driver     string `json:"driver"`
	Cards      int    `json:"cards"`
	Clickers   int    `json:"clickers"`
	GOMAXPROCS int    `json:"gomaxprocs"`

	// Ack latency of the clicks, measured by the client: from sending the
	// request to reading the whole response.
	AckP50Ms float64 `json:"ack_p50_ms"`
	AckP99Ms float64 `json:"ack_p99_ms"`
	// The same requests, from the same client, to a bare net/http handler
	// (reads the body, answers 200).
	BareP50Ms float64 `json:"bare_p50_ms"`
	BareP99Ms float64 `json:"bare_p99_ms"`
	// AckP99OverBare is ack p99 / bare p99.
	AckP99OverBare float64 `json:"ack_p99_over_bare"`

	// Decisions finished: from the first click sent until every batch is
	// done (its tool run, its results stored, the model's answer posted).
	Decisions          int     `json:"decisions"`
	DecisionSeconds    float64 `json:"decision_seconds"`
	DecisionsPerSecond float64 `json:"decisions_per_second"`
	// Raw commits per second (one INSERT per transaction, one connection,
	// the same pragmas or pool settings), measured in the same run.
	RawSQLiteCommitsPerSecond   float64 `json:"raw_sqlite_commits_per_second"`
	RawPostgresCommitsPerSecond float64 `json:"raw_postgres_commits_per_second,omitempty"`
	// DecisionsOverRawCommits is decisions/s ÷ raw commits/s of the driver used.
	DecisionsOverRawCommits float64 `json:"decisions_over_raw_commits"`
	// CPU time of the whole process (Airlock, the fakes and the clients)
	// per decision, from the first click until every batch is done; and
	// per request of the bare baseline. Less sensitive than rates to
	// other load on a shared machine.
	CPUMsPerDecision    float64 `json:"cpu_ms_per_decision"`
	BareCPUMsPerRequest float64 `json:"bare_cpu_ms_per_request"`

	CardsSeconds float64 `json:"cards_seconds"` // creating the cards

	// Resident memory (VmRSS, or the Go runtime's total where /proc is
	// missing) before the cards and with every card pending, both sampled
	// after a GC; the peak is VmHWM at the end of the decisions.
	RSSBeforeBytes  int64   `json:"rss_before_bytes"`
	RSSPendingBytes int64   `json:"rss_pending_bytes"`
	RSSPerCardBytes float64 `json:"rss_per_card_bytes"`
	// RSSPerCardSecondHalfBytes is the growth while the second half of
	// the cards was made, per card: RSSPerCardBytes without what the
	// first cards cost once (connections, page caches, goroutine stacks,
	// the Go heap's headroom).
	RSSPerCardSecondHalfBytes float64 `json:"rss_per_card_second_half_bytes"`
	// RSSPerCardSettledBytes is RSSPerCardBytes with both samples taken
	// once the Go runtime returned its free memory to the system
	// (debug.FreeOSMemory), as an idle process's does within minutes: what
	// the cards keep, without the heap spans the runtime held on to after
	// the burst that made them. The target is on RSSPerCardBytes.
	RSSPerCardSettledBytes float64 `json:"rss_per_card_settled_bytes"`
	// HeapPerCardBytes is the growth of the Go heap's live bytes per card.
	HeapPerCardBytes float64 `json:"heap_per_card_bytes"`
	RSSPeakBytes     int64   `json:"rss_peak_bytes"`
	PeakOverPending  float64 `json:"peak_over_pending"`

	ToolRuns        int64 `json:"tool_runs"`
	ExactlyOnce     bool  `json:"exactly_once"`
	CardUpdates     int64 `json:"card_updates"`
	Refusals        int64 `json:"refusals"`         // ephemeral answers: a click refused
	UnexpectedPosts int64 `json:"unexpected_posts"` // thread posts other than the model's answer

	Targets []BenchTarget `json:"targets"`
}

// BenchTarget is one goal and whether the run met it.
type BenchTarget struct {
	Name string  `json:"name"`
	Want string  `json:"want"`
	Got  float64 `json:"got"`
	Met  bool    `json:"met"`
}

func (r *BenchReport) targets() {
	r.Targets = []BenchTarget{
		{Name: "ack p99 / bare p99", Want: "<= 2", Got: r.AckP99OverBare, Met: r.AckP99OverBare <= 2},
		{Name: "decisions/s", Want: ">= 2000", Got: r.DecisionsPerSecond, Met: r.DecisionsPerSecond >= 2000},
		{Name: "decisions/s ÷ raw commits/s", Want: ">= 0.05", Got: r.DecisionsOverRawCommits, Met: r.DecisionsOverRawCommits >= 0.05},
		{Name: "RSS bytes per pending card", Want: "<= 1024", Got: r.RSSPerCardBytes, Met: r.RSSPerCardBytes <= 1024},
		{Name: "peak RSS / RSS with every card pending", Want: "<= 2", Got: r.PeakOverPending, Met: r.PeakOverPending <= 2},
	}
}

func (r *BenchReport) print(w io.Writer) {
	mib := func(b int64) float64 { return float64(b) / (1 << 20) }
	fmt.Fprintf(w, "airlock bench: %d cards, %d clickers, %s, GOMAXPROCS %d\n", r.Cards, r.Clickers, r.Driver, r.GOMAXPROCS)
	fmt.Fprintf(w, "  ack latency      p50 %.2f ms  p99 %.2f ms\n", r.AckP50Ms, r.AckP99Ms)
	fmt.Fprintf(w, "  bare handler     p50 %.2f ms  p99 %.2f ms\n", r.BareP50Ms, r.BareP99Ms)
	fmt.Fprintf(w, "  ack p99 / bare p99: %.2f\n", r.AckP99OverBare)
	fmt.Fprintf(w, "  decisions        %d in %.2f s: %.0f/s (cards made in %.2f s)\n", r.Decisions, r.DecisionSeconds, r.DecisionsPerSecond, r.CardsSeconds)
	fmt.Fprintf(w, "  raw SQLite commits/s: %.0f\n", r.RawSQLiteCommitsPerSecond)
	if r.RawPostgresCommitsPerSecond > 0 {
		fmt.Fprintf(w, "  raw Postgres commits/s: %.0f\n", r.RawPostgresCommitsPerSecond)
	}
	fmt.Fprintf(w, "  decisions/s ÷ raw commits/s: %.3f\n", r.DecisionsOverRawCommits)
	fmt.Fprintf(w, "  CPU per decision %.2f ms (bare handler: %.3f ms per request)\n", r.CPUMsPerDecision, r.BareCPUMsPerRequest)
	fmt.Fprintf(w, "  RSS              %.1f MiB before, %.1f MiB with %d cards pending: %.0f bytes per card (Go heap %.0f)\n",
		mib(r.RSSBeforeBytes), mib(r.RSSPendingBytes), r.Cards, r.RSSPerCardBytes, r.HeapPerCardBytes)
	fmt.Fprintf(w, "  RSS per card while the second half was made: %.0f bytes; once the runtime returned its free memory: %.0f bytes\n",
		r.RSSPerCardSecondHalfBytes, r.RSSPerCardSettledBytes)
	fmt.Fprintf(w, "  RSS peak         %.1f MiB: %.2f × the pending figure\n", mib(r.RSSPeakBytes), r.PeakOverPending)
	fmt.Fprintf(w, "  tool runs %d, card updates %d, refusals %d, unexpected posts %d\n", r.ToolRuns, r.CardUpdates, r.Refusals, r.UnexpectedPosts)
	for _, t := range r.Targets {
		mark := "met"
		if !t.Met {
			mark = "MISSED"
		}
		fmt.Fprintf(w, "  target %-40s %-8s got %10.3f  %s\n", t.Name, t.Want, t.Got, mark)
	}
	if r.ExactlyOnce {
		fmt.Fprintln(w, "ok: every decision ran its tool exactly once")
	} else {
		fmt.Fprintln(w, "FAIL: some decision did not run its tool exactly once")
	}
}

// Identities of the bench's fake workspace.
const (
	benchTeam      = "T0BENCH"
	benchBotUser   = "U0BENCHBOT"
	benchRequester = "U0BENCHREQ"
	benchApprover  = "U0BENCHAPP"
	benchSecret    = "bench-signing-secret-0123456789abcdef"
	benchToolName  = "bench_tool"
	benchAnswer    = "bench: done"
	benchChannels  = 16
)

func benchChannel(i int) string { return fmt.Sprintf("C0BENCH%04d", i%benchChannels) }
func benchThread(i int) string  { return fmt.Sprintf("1700000000.%06d", i) }

func runBench(ctx context.Context, o benchOptions, stderr io.Writer) (*BenchReport, error) {
	rep := &BenchReport{Driver: o.driver, Cards: o.cards, Clickers: o.clickers, GOMAXPROCS: runtime.GOMAXPROCS(0)}
	dir, err := os.MkdirTemp("", "airlock-bench")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)

	dsn := o.dsn
	if o.driver == storage.DriverPostgres {
		var drop func()
		if dsn, drop, err = benchSchema(ctx, o.dsn); err != nil {
			return nil, err
		}
		defer drop()
	} else if dsn == "" {
		dsn = filepath.Join(dir, "airlock.db")
	}

	// Logs as airlock run writes them (info, text), to nowhere; warnings
	// and errors also to stderr.
	logger := slog.New(benchLogHandler{
		all:  slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}),
		warn: slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}),
	})

	fake := newBenchSlack(o.cards)
	fakeSrv, fakeURL, err := benchServe(fake)
	if err != nil {
		return nil, err
	}
	defer fakeSrv.Close()

	db, err := storage.Open(ctx, o.driver, dsn)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	if err := db.SyncClock(ctx); err != nil {
		return nil, err
	}
	tool := &benchTool{runs: map[string]int{}}
	m := airmetrics.New(nil)
	b, err := bot.New(bot.Config{
		SingleProcess: db.Driver() == storage.DriverSQLite,
		Store:         db,
		Model:         m.Provider(benchModel{}, "bench"),
		Tools:         benchTools{tool},
		Policy:        confirm.NewPolicy(true, nil),
		Channels:      bot.NewChannels([]bot.Channel{{Platform: slack.Platform, ID: "*", Approvers: []string{benchApprover}}}),
		Metrics:       m,
		Now:           db.Clock(),
		Logger:        logger,
		WorkerID:      fmt.Sprintf("bench/%d", os.Getpid()),
		// The per-person and per-channel limits guard the turn path,
		// not decisions: off, so one requester can make every card.
	})
	if err != nil {
		return nil, err
	}
	sa, err := slack.New(slack.Config{
		Mode: slack.ModeHTTP, BotToken: "xoxb-bench", SigningSecret: benchSecret, APIURL: fakeURL + "/api/", Logger: logger,
		Workers: o.workers, Metrics: m,
	}, b, db)
	if err != nil {
		return nil, err
	}
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	if err := sa.Start(runCtx); err != nil {
		return nil, err
	}
	b.Register(slack.Platform, sa)
	var bg sync.WaitGroup
	defer bg.Wait()
	defer stopRun()
	bg.Go(func() { _ = sa.Run(runCtx) })
	bg.Go(func() { b.Run(runCtx, time.Second) })

	routes := map[string]http.Handler{"/slack/events": sa.Handler(), "GET /metrics": m.Handler()}
	airSrv, airURL, err := benchServe(httpHandler(db, routes))
	if err != nil {
		return nil, err
	}
	defer airSrv.Close()
	bareSrv, bareURL, err := benchServe(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
	}))
	if err != nil {
		return nil, err
	}
	defer bareSrv.Close()

	client := &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			MaxIdleConns:        4 * o.clickers,
			MaxIdleConnsPerHost: o.clickers,
			IdleConnTimeout:     time.Minute,
			DisableCompression:  true,
		},
	}
	defer client.CloseIdleConnections()
	eventsURL := airURL + "/slack/events"

	// Memory before any card.
	rssBefore, heapBefore := benchMemory()
	settledBefore := benchSettled()

	// The cards: one mention each, -clickers creators, each waiting for
	// its card before the next mention. They are made in two halves with
	// the memory sampled between: the second half's growth is what a
	// pending card costs once the pools, caches and stacks are warm.
	mention := func(i int) error {
		posted := fake.await(i)
		if err := benchPost(ctx, client, eventsURL, "application/json", benchMention(i)); err != nil {
			return fmt.Errorf("mention %d: %w", i, err)
		}
		select {
		case <-posted:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("card %d was not posted: %w", i, ctx.Err())
		}
	}
	half := o.cards / 2
	start := time.Now()
	if err := benchParallel(ctx, half, o.clickers, mention); err != nil {
		return nil, err
	}
	took := time.Since(start)
	rssHalf, _ := benchMemory()
	start = time.Now()
	if err := benchParallel(ctx, o.cards-half, o.clickers, func(i int) error { return mention(half + i) }); err != nil {
		return nil, err
	}
	sa.Wait()
	rep.CardsSeconds = (took + time.Since(start)).Seconds()

	// Memory with every card pending.
	rssPending, heapPending := benchMemory()
	rep.RSSBeforeBytes, rep.RSSPendingBytes = rssBefore, rssPending
	rep.RSSPerCardBytes = float64(rssPending-rssBefore) / float64(o.cards)
	rep.RSSPerCardSettledBytes = float64(benchSettled()-settledBefore) / float64(o.cards)
	rep.HeapPerCardBytes = float64(heapPending-heapBefore) / float64(o.cards)
	if n := o.cards - half; n > 0 {
		rep.RSSPerCardSecondHalfBytes = float64(rssPending-rssHalf) / float64(n)
	}
	if o.memprofile != "" {
		if err := benchHeapProfile(o.memprofile); err != nil {
			return nil, err
		}
	}

	// The clicks, first to the bare handler, then to Airlock.
	clicks := func(base string, lat []time.Duration) error {
		return benchParallel(ctx, o.cards, o.clickers, func(i int) error {
			body := benchClick(i, fake.ref(i), fake.cardTS(i))
			t0 := time.Now()
			err := benchPost(ctx, client, base, "application/x-www-form-urlencoded", body)
			lat[i] = time.Since(t0)
			if err != nil {
				return fmt.Errorf("click %d: %w", i, err)
			}
			return nil
		})
	}
	bare := make([]time.Duration, o.cards)
	cpu0 := benchCPU()
	if err := clicks(bareURL+"/slack/events", bare); err != nil {
		return nil, err
	}
	rep.BareCPUMsPerRequest = float64(benchCPU()-cpu0) / float64(time.Millisecond) / float64(o.cards)
	if o.cpuprofile != "" {
		f, err := os.Create(o.cpuprofile)
		if err != nil {
			return nil, err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return nil, err
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	acks := make([]time.Duration, o.cards)
	cpu1 := benchCPU()
	first := time.Now()
	if err := clicks(eventsURL, acks); err != nil {
		return nil, err
	}
	select {
	case <-fake.allDone:
	case <-ctx.Done():
		return nil, fmt.Errorf("%d of %d decisions finished: %w", fake.doneCount.Load(), o.cards, ctx.Err())
	}
	last := time.Unix(0, fake.lastDone.Load())
	cpuDecisions := benchCPU() - cpu1
	if o.cpuprofile != "" {
		pprof.StopCPUProfile()
	}
	sa.Wait()
	rep.RSSPeakBytes = benchPeak()

	rep.BareP50Ms, rep.BareP99Ms = quantileMs(bare, 0.50), quantileMs(bare, 0.99)
	rep.AckP50Ms, rep.AckP99Ms = quantileMs(acks, 0.50), quantileMs(acks, 0.99)
	rep.AckP99OverBare = rep.AckP99Ms / rep.BareP99Ms
	rep.Decisions = int(fake.doneCount.Load())
	rep.DecisionSeconds = last.Sub(first).Seconds()
	rep.DecisionsPerSecond = float64(rep.Decisions) / rep.DecisionSeconds
	rep.CPUMsPerDecision = float64(cpuDecisions) / float64(time.Millisecond) / float64(rep.Decisions)
	if rep.RSSPendingBytes > 0 {
		rep.PeakOverPending = float64(rep.RSSPeakBytes) / float64(rep.RSSPendingBytes)
	}
	rep.CardUpdates = fake.updates.Load()
	rep.Refusals = fake.ephemerals.Load()
	rep.UnexpectedPosts = fake.unexpected.Load()

	// Every batch done, every tool run exactly once.
	open := 0
	for _, st := range []confirm.BatchStatus{confirm.BatchPending, confirm.BatchDecided, confirm.BatchRunning} {
		ids, err := db.BatchesIn(ctx, st)
		if err != nil {
			return nil, err
		}
		open += len(ids)
	}
	rep.ToolRuns, rep.ExactlyOnce = tool.check(fake, o.cards)
	rep.ExactlyOnce = rep.ExactlyOnce && open == 0
	if open > 0 {
		fmt.Fprintf(stderr, "airlock bench: %d batches not done\n", open)
	}

	// The baselines' raw commits, after the run (not to count in its memory).
	stopRun()
	bg.Wait()
	n := max(2000, min(20000, 4*o.cards))
	if rep.RawSQLiteCommitsPerSecond, err = storage.RawCommits(ctx, storage.DriverSQLite, filepath.Join(dir, "raw.db"), n); err != nil {
		return nil, err
	}
	raw := rep.RawSQLiteCommitsPerSecond
	if o.driver == storage.DriverPostgres {
		if rep.RawPostgresCommitsPerSecond, err = storage.RawCommits(ctx, storage.DriverPostgres, dsn, n); err != nil {
			return nil, err
		}
		raw = rep.RawPostgresCommitsPerSecond
	}
	rep.DecisionsOverRawCommits = rep.DecisionsPerSecond / raw
	rep.targets()
	return rep, nil
}

// benchParallel calls fn(i) for i in [0, n) from workers goroutines; the
// first error stops the others.
func benchParallel(ctx context.Context, n, workers int, fn func(i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					cancel(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return ctx.Err()
}

// benchServe serves h on a new listener on 127.0.0.1 with the HTTP
// limits airlock run uses, returning its base URL.
func benchServe(h http.Handler) (*http.Server, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	srv := newHTTPServer(h, defaultHTTPLimits)
	go func() { _ = srv.Serve(ln) }()
	return srv, "http://" + ln.Addr().String(), nil
}

// benchPost sends a request signed as Slack signs it and reads the whole
// answer; anything but 200 is an error.
func benchPost(ctx context.Context, client *http.Client, u, contentType string, body []byte) error {
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("X-Slack-Request-Timestamp", ts)
	req.Header.Set("X-Slack-Signature", "v0="+hex.EncodeToString(slack.Sign(benchSecret, ts, body)))
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %s", resp.Status)
	}
	return nil
}

func benchMention(i int) []byte {
	ts := benchThread(i)
	b, _ := json.Marshal(map[string]any{
		"token": "ignored", "team_id": benchTeam, "api_app_id": "A0BENCH", "type": "event_callback",
		"event_id": fmt.Sprintf("Ev0BENCH%07d", i), "event_time": 1700000000,
		"event": map[string]any{
			"type": "app_mention", "user": benchRequester, "text": "<@" + benchBotUser + "> run the bench tool",
			"ts": ts, "event_ts": ts, "channel": benchChannel(i),
		},
	})
	return b
}

// benchClick is an Allow click on card i, posted as message cardTS in
// its thread.
func benchClick(i int, ref, cardTS string) []byte {
	ch, ts := benchChannel(i), benchThread(i)
	payload, _ := json.Marshal(map[string]any{
		"type": "block_actions", "token": "ignored", "trigger_id": fmt.Sprintf("%d.1700000000.bench", i),
		"team": map[string]any{"id": benchTeam}, "api_app_id": "A0BENCH",
		"user":      map[string]any{"id": benchApprover, "team_id": benchTeam},
		"channel":   map[string]any{"id": ch},
		"container": map[string]any{"type": "message", "channel_id": ch, "message_ts": cardTS, "thread_ts": ts},
		"message":   map[string]any{"ts": cardTS, "thread_ts": ts},
		"actions": []map[string]any{{
			"action_id": slack.ActionAllow, "block_id": "calls", "value": ref, "type": "button", "action_ts": "1700000000.000001",
		}},
	})
	return []byte("payload=" + url.QueryEscape(string(payload)))
}

// quantileMs is the q-quantile of ds in milliseconds.
func quantileMs(ds []time.Duration, q float64) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	i = min(max(i, 0), len(s)-1)
	return float64(s[i]) / float64(time.Millisecond)
}

// benchMemory returns the resident set and the Go heap's live bytes after
// a GC, so two samples compare what is kept rather than where the GC
// cycle happened to be.
func benchMemory() (rss, heapLive int64) {
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	heapLive = int64(s[0].Value.Uint64())
	if v, ok := procStatus("VmRSS"); ok {
		return v, heapLive
	}
	return int64(s[1].Value.Uint64() - s[2].Value.Uint64()), heapLive
}

// benchSettled is the resident memory once the Go runtime returned its
// free memory to the system (see RSSPerCardSettledBytes).
func benchSettled() int64 {
	debug.FreeOSMemory()
	rss, _ := benchMemory()
	return rss
}

// benchCPU is the CPU time (user and system) the process has used, from
// /proc/self/stat (in clock ticks, 100 a second); zero where it is missing.
func benchCPU() time.Duration {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0
	}
	// The fields after the command (which may hold spaces), from field 3.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(utime+stime) * (time.Second / 100)
}

// benchPeak is the peak resident set (VmHWM), or the Go runtime's total
// where /proc is missing.
func benchPeak() int64 {
	if v, ok := procStatus("VmHWM"); ok {
		return v
	}
	rss, _ := benchMemory()
	return rss
}

// procStatus reads a "kB" field of /proc/self/status, in bytes.
func procStatus(field string) (int64, bool) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != field {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		return n << 10, err == nil
	}
	return 0, false
}

func benchHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return pprof.Lookup("heap").WriteTo(f, 0)
}

// benchSchema makes a fresh schema on the PostgreSQL server and returns a
// DSN using it, and a function dropping it.
func benchSchema(ctx context.Context, dsn string) (string, func(), error) {
	admin, err := sqlx.Open("pgx", dsn)
	if err != nil {
		return "", nil, err
	}
	schema := fmt.Sprintf("airlock_bench_%d_%d", os.Getpid(), time.Now().UnixNano()%1e9)
	if _, err := admin.ExecContext(ctx, `CREATE SCHEMA `+schema); err != nil {
		admin.Close()
		return "", nil, fmt.Errorf("create schema: %w", err)
	}
	drop := func() {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = admin.ExecContext(dctx, `DROP SCHEMA `+schema+` CASCADE`)
		admin.Close()
	}
	if !strings.Contains(dsn, "://") {
		return dsn + " search_path=" + schema, drop, nil
	}
	u, err := url.Parse(dsn)
	if err != nil {
		drop()
		return "", nil, err
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), drop, nil
}

// benchLogHandler formats every record at info and up, as airlock run
// does, and also writes warnings and errors to stderr.
type benchLogHandler struct{ all, warn slog.Handler }

func (h benchLogHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.all.Enabled(ctx, l)
}
func (h benchLogHandler) Handle(ctx context.Context, r slog.Record) error {
	if h.warn.Enabled(ctx, r.Level) {
		_ = h.warn.Handle(ctx, r.Clone())
	}
	return h.all.Handle(ctx, r)
}
func (h benchLogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return benchLogHandler{all: h.all.WithAttrs(as), warn: h.warn.WithAttrs(as)}
}
func (h benchLogHandler) WithGroup(g string) slog.Handler {
	return benchLogHandler{all: h.all.WithGroup(g), warn: h.warn.WithGroup(g)}
}

// benchModel answers at once: a call of the bench tool to a person's
// message, and a short text to the tool's result. It keeps nothing, so it
// adds nothing to the memory per card (modeltest.Scripted records every
// request).
type benchModel struct{}

func (benchModel) Generate(_ context.Context, req model.Request) (model.Message, error) {
	if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == model.RoleTool {
		return model.Message{Role: model.RoleAssistant, Text: benchAnswer}, nil
	}
	return model.Message{Role: model.RoleAssistant, Text: "I'll run the bench tool.",
		ToolCalls: []confirm.ToolCall{{ID: "call_bench", Name: benchToolName, Args: json.RawMessage(`{"target":"bench"}`)}}}, nil
}

// benchTool is an instant gated tool counting its runs per batch.
type benchTool struct {
	mu   sync.Mutex
	runs map[string]int // batch id -> runs
	n    atomic.Int64
}

func (t *benchTool) Spec() model.ToolSpec {
	return model.ToolSpec{Name: benchToolName, Description: "Does nothing, at once.", Parameters: json.RawMessage(`{"type":"object"}`)}
}
func (t *benchTool) Confirm() bool                           { return true }
func (t *benchTool) Validate(json.RawMessage) error          { return nil }
func (t *benchTool) Summary(json.RawMessage) (string, error) { return "Run the bench tool", nil }
func (t *benchTool) Run(_ context.Context, _ json.RawMessage, key string) (string, error) {
	batch, _, _ := strings.Cut(key, "/")
	t.mu.Lock()
	t.runs[batch]++
	t.mu.Unlock()
	t.n.Add(1)
	return `{"ok":true}`, nil
}

// check reports the runs and whether each card's batch ran exactly once.
func (t *benchTool) check(f *benchSlack, cards int) (int64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ok := len(t.runs) == cards
	for i := range cards {
		id, _, err := confirm.ParseRef(f.ref(i))
		if err != nil || t.runs[id] != 1 {
			ok = false
		}
	}
	return t.n.Load(), ok && t.n.Load() == int64(cards)
}

type benchTools struct{ t *benchTool }

func (s benchTools) Get(name string) (tools.Tool, bool) { return s.t, name == benchToolName }
func (s benchTools) Specs() []model.ToolSpec            { return []model.ToolSpec{s.t.Spec()} }

// benchSlack is a fake Slack Web API: auth.test, chat.postMessage (a card:
// its Allow button's reference is kept; the model's answer: the card's
// decision is finished), chat.update and chat.postEphemeral. It keeps one
// reference per card and nothing else per message.
type benchSlack struct {
	cards   int
	mu      sync.Mutex
	refs    []string
	cardTSs []string // each card's message ts
	waiters map[int]chan struct{}

	seq        atomic.Int64
	doneCount  atomic.Int64
	lastDone   atomic.Int64
	done       []atomic.Bool
	allDone    chan struct{}
	updates    atomic.Int64
	ephemerals atomic.Int64
	unexpected atomic.Int64
}

func newBenchSlack(cards int) *benchSlack {
	return &benchSlack{cards: cards, refs: make([]string, cards), cardTSs: make([]string, cards), waiters: map[int]chan struct{}{},
		done: make([]atomic.Bool, cards), allDone: make(chan struct{})}
}

// await returns a channel closed when card i is posted.
func (f *benchSlack) await(i int) <-chan struct{} {
	c := make(chan struct{})
	f.mu.Lock()
	f.waiters[i] = c
	f.mu.Unlock()
	return c
}

func (f *benchSlack) ref(i int) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.refs[i]
}

// cardTS is the ts of card i's message.
func (f *benchSlack) cardTS(i int) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cardTSs[i]
}

// card is the index of the card whose thread ts is ts, or -1.
func (f *benchSlack) card(ts string) int {
	_, frac, ok := strings.Cut(ts, ".")
	i, err := strconv.Atoi(frac)
	if !ok || err != nil || i < 0 || i >= f.cards || ts != benchThread(i) {
		return -1
	}
	return i
}

func (f *benchSlack) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	params, _ := url.ParseQuery(string(body))
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") { // chat.postMessage, chat.update
		var m struct {
			Channel, TS, Text string
			ThreadTS          string          `json:"thread_ts"`
			Blocks            json.RawMessage `json:"blocks"`
		}
		_ = json.Unmarshal(body, &m)
		params = url.Values{"channel": {m.Channel}, "ts": {m.TS}, "text": {m.Text}, "thread_ts": {m.ThreadTS}}
		if len(m.Blocks) > 0 {
			params.Set("blocks", string(m.Blocks))
		}
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	switch strings.TrimPrefix(r.URL.Path, "/api/") {
	case "auth.test":
		fmt.Fprintf(w, `{"ok":true,"url":"https://bench.slack.com/","team":"Bench","user":"airlock","team_id":%q,"user_id":%q,"bot_id":"B0BENCH"}`, benchTeam, benchBotUser)
	case "chat.postMessage":
		ch := params.Get("channel")
		ts := fmt.Sprintf("1800000000.%09d", f.seq.Add(1))
		i := f.card(params.Get("thread_ts"))
		switch {
		case i < 0:
			f.unexpected.Add(1)
		case params.Get("blocks") != "":
			f.posted(i, allowRef(params.Get("blocks")), ts)
		case params.Get("text") == benchAnswer:
			if f.done[i].CompareAndSwap(false, true) {
				f.lastDone.Store(time.Now().UnixNano())
				if f.doneCount.Add(1) == int64(f.cards) {
					close(f.allDone)
				}
			} else {
				f.unexpected.Add(1)
			}
		default:
			f.unexpected.Add(1)
		}
		fmt.Fprintf(w, `{"ok":true,"channel":%q,"ts":%q}`, ch, ts)
	case "chat.update":
		f.updates.Add(1)
		fmt.Fprintf(w, `{"ok":true,"channel":%q,"ts":%q,"text":""}`, params.Get("channel"), params.Get("ts"))
	case "chat.postEphemeral":
		f.ephemerals.Add(1)
		fmt.Fprintf(w, `{"ok":true,"message_ts":"1800000000.000000"}`)
	default:
		fmt.Fprint(w, `{"ok":false,"error":"unknown_method"}`)
	}
}

func (f *benchSlack) posted(i int, ref, ts string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refs[i] == "" {
		f.refs[i], f.cardTSs[i] = ref, ts
	}
	if c := f.waiters[i]; c != nil {
		close(c)
		delete(f.waiters, i)
	}
}

// allowRef finds the Allow button's value in a card's blocks.
func allowRef(blocks string) string {
	var bs []struct {
		Elements []struct {
			ActionID string `json:"action_id"`
			Value    string `json:"value"`
		} `json:"elements"`
	}
	if json.Unmarshal([]byte(blocks), &bs) != nil {
		return ""
	}
	for _, b := range bs {
		for _, e := range b.Elements {
			if e.ActionID == slack.ActionAllow {
				return e.Value
			}
		}
	}
	return ""
}
