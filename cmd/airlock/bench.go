package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/airlockhq/airlock/adapters/slack"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/storage"
)

// bench measures the decision path end to end against fakes on
// 127.0.0.1: a fake Slack Web API, an instant model and an instant tool,
// with the real Slack adapter in HTTP mode behind the real HTTP server on
// a real listener, and real storage (SQLite in a temporary file, or
// PostgreSQL in a fresh schema). Airlock runs in a process of its own
// (this executable as bench-server), so that its memory and CPU are
// measured without the fake Slack's and the clients'. The bench creates
// -cards cards (one mention each, -clickers at a time), then -clickers
// concurrent clickers POST one signed Allow click per card. It reports
// the clicks' ack latency as the client sees it, decisions finished per
// second (until every batch is done and the model's answer posted), and
// Airlock's memory per pending card; and, in the same run, the baselines
// they are judged against: a bare net/http handler in Airlock's process
// answering the same requests from the same client, and raw commits per
// second of the database with the same settings. Every decision must run
// its tool exactly once.
func bench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("airlock bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := benchOptions{}
	fs.IntVar(&o.cards, "cards", 2000, "cards to create and decide")
	fs.IntVar(&o.clickers, "clickers", 50, "concurrent clickers (and card creators)")
	fs.StringVar(&o.driver, "driver", "sqlite", "sqlite or postgres")
	fs.StringVar(&o.dsn, "dsn", "", "postgres: the server (a fresh schema is made in it and dropped after); sqlite: a new or empty file (default: one in a temporary folder)")
	fs.BoolVar(&o.json, "json", false, "print the report as JSON")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of the decision phase (the clicks until every batch is done) to this file")
	fs.StringVar(&o.memprofile, "memprofile", "", "write a heap profile taken with every card pending to this file")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "give up after this long")
	fs.IntVar(&o.workers, "workers", 0, "the Slack adapter's workers (default: its default, slack.DefaultConcurrency)")
	fs.IntVar(&o.probe, "probe", 0, "also send this many requests a second to the bare handler, in Airlock's process, while the clicks are sent (default 0: none)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if o.probe < 0 || o.probe > maxBenchProbe {
		fmt.Fprintf(stderr, "airlock bench: -probe must be 0 to %d\n", maxBenchProbe)
		return 2
	}
	if o.cards < 1 || o.clickers < 1 || o.cards > maxBenchCards {
		fmt.Fprintf(stderr, "airlock bench: -cards must be 1 to %d and -clickers positive\n", maxBenchCards)
		return 2
	}
	switch o.driver {
	case storage.DriverSQLite:
		if err := benchNewFile(o.dsn); err != nil {
			fmt.Fprintf(stderr, "airlock bench: -dsn: %v\n", err)
			return 2
		}
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

// benchNewFile refuses a SQLite DSN naming a file that holds anything:
// the bench's Airlock would recover and change what is in it (a
// database of airlock run's, given by mistake).
func benchNewFile(dsn string) error {
	if dsn == "" {
		return nil
	}
	path, _, _ := strings.Cut(strings.TrimPrefix(dsn, "file:"), "?")
	if fi, err := os.Stat(path); err == nil && fi.Size() > 0 {
		return fmt.Errorf("%s is not empty; the bench needs a new file", path)
	}
	return nil
}

// maxBenchProbe bounds -probe: more would be a load of its own.
const maxBenchProbe = 5000

// maxBenchCards keeps each card's thread ts within Slack's 6 digits.
const maxBenchCards = 999_999

type benchOptions struct {
	cards, clickers        int
	driver, dsn            string
	json                   bool
	cpuprofile, memprofile string
	timeout                time.Duration
	workers                int
	probe                  int
}

// BenchReport is what airlock bench prints (-json: as is).
type BenchReport struct {
	Driver     string `json:"driver"`
	Cards      int    `json:"cards"`
	Clickers   int    `json:"clickers"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	// AirlockPID is the process Airlock ran in, apart from the bench's
	// fakes and clients; its memory and CPU are the figures below.
	AirlockPID int `json:"airlock_pid"`

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
	// AckServerP99AtMostMs bounds the p99 of the clicks' ack time inside
	// Airlock's handler (airlock_ack_seconds, from the handler's start to
	// the answer written): the upper bound of the histogram's bucket that
	// holds it. The rest of the client's figure is the time the request
	// and its answer wait for a core, at both ends. -1: past the last
	// bound (3 s).
	AckServerP99AtMostMs float64 `json:"ack_server_p99_at_most_ms"`
	// The clicks' wait before the handler started: from sending the
	// request to the handler's start in the process serving it (a
	// response header the bench's server adds; one clock), for Airlock
	// and for the bare handler. Inside one Go process a request waits
	// there while every P is busy: the scheduler looks for network events
	// when a P runs out of work, or every 10 ms.
	AckWaitP50Ms  float64 `json:"ack_wait_p50_ms"`
	AckWaitP99Ms  float64 `json:"ack_wait_p99_ms"`
	BareWaitP50Ms float64 `json:"bare_wait_p50_ms"`
	BareWaitP99Ms float64 `json:"bare_wait_p99_ms"`
	// With -probe: the bare handler's latency (as AckP50Ms measures it)
	// for requests sent at a steady rate while the clicks were sent, so
	// served by Airlock's process while it decided: what any handler of
	// that process would see. AckP99OverLoadedBare is ack p99 / this p99.
	LoadedBareRequests   int     `json:"loaded_bare_requests,omitempty"`
	LoadedBareP50Ms      float64 `json:"loaded_bare_p50_ms,omitempty"`
	LoadedBareP99Ms      float64 `json:"loaded_bare_p99_ms,omitempty"`
	AckP99OverLoadedBare float64 `json:"ack_p99_over_loaded_bare,omitempty"`

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
	// CPU time of Airlock's process per decision, from the first click
	// until every batch is done; and per request of the bare baseline
	// (served by the same process). Less sensitive than rates to other
	// load on a shared machine.
	CPUMsPerDecision    float64 `json:"cpu_ms_per_decision"`
	BareCPUMsPerRequest float64 `json:"bare_cpu_ms_per_request"`
	// HarnessCPUMsPerDecision is the bench's own process's CPU (the fake
	// Slack, the clickers) per decision over the same span: it runs on
	// the same cores as Airlock.
	HarnessCPUMsPerDecision float64 `json:"harness_cpu_ms_per_decision"`

	CardsSeconds float64 `json:"cards_seconds"` // creating the cards

	// Airlock's resident memory (VmRSS, or the Go runtime's total where
	// /proc is missing) before the cards and with every card pending,
	// both sampled after a GC; the peak is VmHWM at the end of the
	// decisions.
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
	fmt.Fprintf(w, "  ack p99 / bare p99: %.2f (in Airlock's handler, airlock_ack_seconds: p99 <= %g ms)\n", r.AckP99OverBare, r.AckServerP99AtMostMs)
	fmt.Fprintf(w, "  before the handler started: p50 %.2f ms  p99 %.2f ms (bare: p50 %.2f ms  p99 %.2f ms)\n", r.AckWaitP50Ms, r.AckWaitP99Ms, r.BareWaitP50Ms, r.BareWaitP99Ms)
	if r.LoadedBareRequests > 0 {
		fmt.Fprintf(w, "  bare handler while Airlock decided (%d requests): p50 %.2f ms  p99 %.2f ms; ack p99 / that p99: %.2f\n",
			r.LoadedBareRequests, r.LoadedBareP50Ms, r.LoadedBareP99Ms, r.AckP99OverLoadedBare)
	}
	fmt.Fprintf(w, "  decisions        %d in %.2f s: %.0f/s (cards made in %.2f s)\n", r.Decisions, r.DecisionSeconds, r.DecisionsPerSecond, r.CardsSeconds)
	fmt.Fprintf(w, "  raw SQLite commits/s: %.0f\n", r.RawSQLiteCommitsPerSecond)
	if r.RawPostgresCommitsPerSecond > 0 {
		fmt.Fprintf(w, "  raw Postgres commits/s: %.0f\n", r.RawPostgresCommitsPerSecond)
	}
	fmt.Fprintf(w, "  decisions/s ÷ raw commits/s: %.3f\n", r.DecisionsOverRawCommits)
	fmt.Fprintf(w, "  CPU per decision %.2f ms (bare handler: %.3f ms per request; the bench's fakes and clients beside it: %.2f ms)\n",
		r.CPUMsPerDecision, r.BareCPUMsPerRequest, r.HarnessCPUMsPerDecision)
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
	rep := &BenchReport{Driver: o.driver, Cards: o.cards, Clickers: o.clickers}
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

	fake := newBenchSlack(o.cards)
	fakeSrv, fakeURL, err := benchServe(fake)
	if err != nil {
		return nil, err
	}
	defer fakeSrv.Close()

	air, err := startBenchServer(ctx, o, dsn, fakeURL, stderr)
	if err != nil {
		return nil, err
	}
	defer air.stop()
	// The fakes and the clients run on one P: they need less than a core,
	// and more Ps would only spin beside Airlock's on the same cores. The
	// raw commits, after, get them all, as Airlock's process does.
	procs := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(procs)

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
	eventsURL := air.hello.Events + "/slack/events"

	// Airlock's memory before any card.
	before, err := air.memory(false, false)
	if err != nil {
		return nil, err
	}
	settledBefore, err := air.memory(false, true)
	if err != nil {
		return nil, err
	}
	rep.GOMAXPROCS, rep.AirlockPID = before.Procs, before.PID

	// The cards: one mention each, -clickers creators, each waiting for
	// its card before the next mention. They are made in two halves with
	// the memory sampled between: the second half's growth is what a
	// pending card costs once the pools, caches and stacks are warm.
	mention := func(i int) error {
		posted := fake.await(i)
		if _, err := benchPost(ctx, client, eventsURL, "application/json", benchMention(i)); err != nil {
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
	atHalf, err := air.memory(true, false)
	if err != nil {
		return nil, err
	}
	start = time.Now()
	if err := benchParallel(ctx, o.cards-half, o.clickers, func(i int) error { return mention(half + i) }); err != nil {
		return nil, err
	}
	rep.CardsSeconds = (took + time.Since(start)).Seconds()

	// Memory with every card pending.
	pending, err := air.memory(true, false)
	if err != nil {
		return nil, err
	}
	settledPending, err := air.memory(false, true)
	if err != nil {
		return nil, err
	}
	rep.RSSBeforeBytes, rep.RSSPendingBytes = before.RSS, pending.RSS
	rep.RSSPerCardBytes = float64(pending.RSS-before.RSS) / float64(o.cards)
	rep.RSSPerCardSettledBytes = float64(settledPending.RSS-settledBefore.RSS) / float64(o.cards)
	rep.HeapPerCardBytes = float64(pending.HeapLive-before.HeapLive) / float64(o.cards)
	if n := o.cards - half; n > 0 {
		rep.RSSPerCardSecondHalfBytes = float64(pending.RSS-atHalf.RSS) / float64(n)
	}
	if o.memprofile != "" {
		if err := air.profile("heap", o.memprofile); err != nil {
			return nil, err
		}
	}

	// The clicks, first to the bare handler, then to Airlock; their
	// bodies made beforehand, so that the clickers' CPU does not compete
	// with Airlock's for the cores.
	bodies := make([][]byte, o.cards)
	for i := range bodies {
		bodies[i] = benchClick(i, fake.ref(i), fake.cardTS(i))
	}
	// lat: from sending to the whole answer read; wait: from sending to
	// the handler's start (the two processes read one clock).
	clicks := func(base string, lat, wait []time.Duration) error {
		return benchParallel(ctx, o.cards, o.clickers, func(i int) error {
			t0 := time.Now()
			started, err := benchPost(ctx, client, base, "application/x-www-form-urlencoded", bodies[i])
			lat[i] = time.Since(t0)
			if err != nil {
				return fmt.Errorf("click %d: %w", i, err)
			}
			if started.IsZero() {
				return fmt.Errorf("click %d: the answer lacks %s", i, benchStartHeader)
			}
			wait[i] = max(started.Sub(t0), 0)
			return nil
		})
	}
	bare, bareWait := make([]time.Duration, o.cards), make([]time.Duration, o.cards)
	cpu0, err := air.cpu()
	if err != nil {
		return nil, err
	}
	if err := clicks(air.hello.Bare+"/slack/events", bare, bareWait); err != nil {
		return nil, err
	}
	cpu1, err := air.cpu()
	if err != nil {
		return nil, err
	}
	rep.BareCPUMsPerRequest = float64(cpu1.CPU-cpu0.CPU) / float64(time.Millisecond) / float64(o.cards)
	acked0, err := benchAckHistogram(ctx, client, air.hello.Events)
	if err != nil {
		return nil, err
	}
	if o.cpuprofile != "" {
		if err := air.profile("cpu-start", o.cpuprofile); err != nil {
			return nil, err
		}
	}
	acks, ackWait := make([]time.Duration, o.cards), make([]time.Duration, o.cards)
	cpu2, err := air.cpu()
	if err != nil {
		return nil, err
	}
	harness0 := benchCPU()
	var probed func() []time.Duration
	if o.probe > 0 {
		probed = benchProbe(ctx, air.hello.Bare+"/slack/events", bodies[0], o.probe)
	}
	first := time.Now()
	err = clicks(eventsURL, acks, ackWait)
	var loaded []time.Duration
	if probed != nil {
		loaded = probed()
	}
	if err != nil {
		return nil, err
	}
	select {
	case <-fake.allDone:
	case <-ctx.Done():
		return nil, fmt.Errorf("%d of %d decisions finished: %w", fake.doneCount.Load(), o.cards, ctx.Err())
	}
	last := time.Unix(0, fake.lastDone.Load())
	harness := benchCPU() - harness0
	cpu3, err := air.cpu()
	if err != nil {
		return nil, err
	}
	if o.cpuprofile != "" {
		if err := air.profile("cpu-stop", ""); err != nil {
			return nil, err
		}
	}
	acked1, err := benchAckHistogram(ctx, client, air.hello.Events)
	if err != nil {
		return nil, err
	}
	rep.AckServerP99AtMostMs = -1 // past the last bound
	if q := benchBucketQuantile(acked0, acked1, 0.99); !math.IsInf(q, 1) {
		rep.AckServerP99AtMostMs = q * 1000
	}

	rep.BareP50Ms, rep.BareP99Ms = quantileMs(bare, 0.50), quantileMs(bare, 0.99)
	rep.AckP50Ms, rep.AckP99Ms = quantileMs(acks, 0.50), quantileMs(acks, 0.99)
	rep.AckP99OverBare = rep.AckP99Ms / rep.BareP99Ms
	if len(loaded) > 0 {
		rep.LoadedBareRequests = len(loaded)
		rep.LoadedBareP50Ms, rep.LoadedBareP99Ms = quantileMs(loaded, 0.50), quantileMs(loaded, 0.99)
		rep.AckP99OverLoadedBare = rep.AckP99Ms / rep.LoadedBareP99Ms
	}
	rep.BareWaitP50Ms, rep.BareWaitP99Ms = quantileMs(bareWait, 0.50), quantileMs(bareWait, 0.99)
	rep.AckWaitP50Ms, rep.AckWaitP99Ms = quantileMs(ackWait, 0.50), quantileMs(ackWait, 0.99)
	rep.Decisions = int(fake.doneCount.Load())
	rep.DecisionSeconds = last.Sub(first).Seconds()
	rep.DecisionsPerSecond = float64(rep.Decisions) / rep.DecisionSeconds
	rep.CPUMsPerDecision = float64(cpu3.CPU-cpu2.CPU) / float64(time.Millisecond) / float64(rep.Decisions)
	rep.HarnessCPUMsPerDecision = float64(harness) / float64(time.Millisecond) / float64(rep.Decisions)
	rep.RSSPeakBytes = cpu3.Peak
	if rep.RSSPendingBytes > 0 {
		rep.PeakOverPending = float64(rep.RSSPeakBytes) / float64(rep.RSSPendingBytes)
	}

	// Every batch done, every tool run exactly once.
	reply, err := air.do(benchRequest{Op: "result"})
	if err != nil {
		return nil, err
	}
	res := reply.Result
	if res == nil {
		return nil, errors.New("airlock result: no runs")
	}
	rep.CardUpdates = fake.updates.Load()
	rep.Refusals = fake.ephemerals.Load()
	rep.UnexpectedPosts = fake.unexpected.Load()
	rep.ToolRuns = res.ToolRuns
	rep.ExactlyOnce = res.Open == 0 && res.ToolRuns == int64(o.cards) && len(res.Runs) == o.cards
	for i := range o.cards {
		if id, _, err := confirm.ParseRef(fake.ref(i)); err != nil || res.Runs[id] != 1 {
			rep.ExactlyOnce = false
		}
	}
	if res.Open > 0 {
		fmt.Fprintf(stderr, "airlock bench: %d batches not done\n", res.Open)
	}

	// The baselines' raw commits, once Airlock has stopped.
	if err := air.stop(); err != nil {
		return nil, err
	}
	runtime.GOMAXPROCS(procs)
	n := max(2000, min(20000, 4*o.cards))
	if rep.RawSQLiteCommitsPerSecond, err = medianRawCommits(ctx, storage.DriverSQLite, filepath.Join(dir, "raw.db"), n); err != nil {
		return nil, err
	}
	raw := rep.RawSQLiteCommitsPerSecond
	if o.driver == storage.DriverPostgres {
		if rep.RawPostgresCommitsPerSecond, err = medianRawCommits(ctx, storage.DriverPostgres, dsn, n); err != nil {
			return nil, err
		}
		raw = rep.RawPostgresCommitsPerSecond
	}
	rep.DecisionsOverRawCommits = rep.DecisionsPerSecond / raw
	rep.targets()
	return rep, nil
}

// benchAirlock is the bench's Airlock: a bench-server process (this
// executable, started anew) and its listeners. Its figures are asked for
// over its stdin and stdout, which no one else can reach.
type benchAirlock struct {
	hello  benchHello
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.Reader
	enc    *json.Encoder
	dec    *json.Decoder
	once   sync.Once
	err    error
}

// startBenchServer starts the bench's Airlock process and waits for its
// listeners. Its warnings go to stderr.
func startBenchServer(ctx context.Context, o benchOptions, dsn, slackURL string, stderr io.Writer) (*benchAirlock, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("start airlock: %w", err)
	}
	cmd := exec.CommandContext(ctx, exe, benchServerCmd, "-driver", o.driver, "-dsn", dsn, "-slack", slackURL, "-workers", strconv.Itoa(o.workers))
	cmd.Env = append(os.Environ(), benchServerEnv+"=1")
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start airlock: %w", err)
	}
	a := &benchAirlock{cmd: cmd, stdin: stdin, stdout: stdout, enc: json.NewEncoder(stdin), dec: json.NewDecoder(stdout)}
	if err := a.dec.Decode(&a.hello); err != nil {
		return nil, fmt.Errorf("start airlock: no listeners announced: %w (exit: %v)", err, a.stop())
	}
	return a, nil
}

// stop closes the process's stdin, which stops it, and waits for it.
func (a *benchAirlock) stop() error {
	a.once.Do(func() {
		a.stdin.Close()
		_, _ = io.Copy(io.Discard, a.stdout)
		if err := a.cmd.Wait(); err != nil {
			a.err = fmt.Errorf("airlock %s: %w", benchServerCmd, err)
		}
	})
	return a.err
}

// do sends one request and reads its reply.
func (a *benchAirlock) do(req benchRequest) (benchReply, error) {
	var reply benchReply
	if err := a.enc.Encode(req); err != nil {
		return reply, fmt.Errorf("airlock %s: %w", req.Op, err)
	}
	if err := a.dec.Decode(&reply); err != nil {
		return reply, fmt.Errorf("airlock %s: %w", req.Op, err)
	}
	if reply.Error != "" {
		return reply, fmt.Errorf("airlock %s: %s", req.Op, reply.Error)
	}
	return reply, nil
}

// cpu is the process's CPU time and peak memory so far.
func (a *benchAirlock) cpu() (benchSample, error) {
	return a.sample(benchRequest{Op: "cpu"})
}

// memory is the process's figures with its resident memory after a GC;
// wait: once its work so far is done; settle: after it returned its free
// memory to the system.
func (a *benchAirlock) memory(wait, settle bool) (benchSample, error) {
	return a.sample(benchRequest{Op: "memory", Wait: wait, Settle: settle})
}

func (a *benchAirlock) sample(req benchRequest) (benchSample, error) {
	reply, err := a.do(req)
	if err != nil || reply.Sample == nil {
		return benchSample{}, cmp.Or(err, fmt.Errorf("airlock %s: no figures", req.Op))
	}
	return *reply.Sample, nil
}

// profile asks for a profile op (heap, cpu-start, cpu-stop) into file,
// a path as the bench sees it (the process shares its working directory).
func (a *benchAirlock) profile(op, file string) error {
	_, err := a.do(benchRequest{Op: op, File: file})
	return err
}

// benchAckHistogram scrapes Airlock's /metrics for the cumulative counts
// of airlock_ack_seconds's buckets, by upper bound (seconds).
func benchAckHistogram(ctx context.Context, client *http.Client, base string) (map[float64]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape metrics: %s", resp.Status)
	}
	buckets := map[float64]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		// airlock_ack_seconds_bucket{platform="slack",le="0.001"} 3980
		line, ok := strings.CutPrefix(sc.Text(), `airlock_ack_seconds_bucket{platform="slack",le="`)
		if !ok {
			continue
		}
		le, count, ok := strings.Cut(line, `"} `)
		bound, err1 := strconv.ParseFloat(le, 64)
		n, err2 := strconv.ParseFloat(count, 64)
		if ok && err1 == nil && err2 == nil {
			buckets[bound] = n
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("scrape metrics: %w", err)
	}
	if len(buckets) == 0 {
		return nil, errors.New("scrape metrics: no airlock_ack_seconds buckets for slack")
	}
	return buckets, nil
}

// benchBucketQuantile is the upper bound of the bucket holding the
// q-quantile of what was observed between two scrapes of a histogram
// (+Inf when it is past the last bound).
func benchBucketQuantile(before, after map[float64]float64, q float64) float64 {
	bounds := slices.Sorted(maps.Keys(after))
	total := after[math.Inf(1)] - before[math.Inf(1)]
	for _, b := range bounds {
		if after[b]-before[b] >= q*total {
			return b
		}
	}
	return math.Inf(1)
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
// answer; anything but 200 is an error. started is when the handler began
// on it (benchStartHeader), zero when the answer does not say.
func benchPost(ctx context.Context, client *http.Client, u, contentType string, body []byte) (started time.Time, err error) {
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return time.Time{}, err
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("X-Slack-Request-Timestamp", ts)
	req.Header.Set("X-Slack-Signature", "v0="+hex.EncodeToString(slack.Sign(benchSecret, ts, body)))
	resp, err := client.Do(req)
	if err != nil {
		return time.Time{}, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return time.Time{}, fmt.Errorf("status %s", resp.Status)
	}
	if ns, err := strconv.ParseInt(resp.Header.Get(benchStartHeader), 10, 64); err == nil {
		started = time.Unix(0, ns)
	}
	return started, nil
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

// benchProbe sends body to the bare handler at u, rate times a second,
// each request on time however long the earlier ones take (at most 64 at
// once, on connections of their own), until the function it returns is
// called; that returns the latencies of the requests answered with 200.
func benchProbe(ctx context.Context, u string, body []byte, rate int) func() []time.Duration {
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}
	stop := make(chan struct{})
	var (
		mu   sync.Mutex
		lat  []time.Duration
		sent sync.WaitGroup
	)
	slots := make(chan struct{}, 64)
	send := func() {
		select {
		case slots <- struct{}{}:
		default:
			return // 64 outstanding: this one is skipped
		}
		sent.Go(func() {
			defer func() { <-slots }()
			t0 := time.Now()
			if _, err := benchPost(ctx, client, u, "application/x-www-form-urlencoded", body); err == nil {
				d := time.Since(t0)
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}
		})
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(time.Second / time.Duration(rate))
		defer t.Stop()
		for {
			send() // the first at once: a short run has one at least
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() []time.Duration {
		close(stop)
		<-done
		sent.Wait()
		client.CloseIdleConnections()
		mu.Lock()
		defer mu.Unlock()
		return lat
	}
}

// quantileMs is the q-quantile of ds in milliseconds.
func quantileMs(ds []time.Duration, q float64) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	i = min(max(i, 0), len(s)-1)
	return float64(s[i]) / float64(time.Millisecond)
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
	var params url.Values
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		params, _ = url.ParseQuery(string(body))
	} else { // chat.postMessage, chat.update
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

// rawCommitRuns is how many times the raw-commit baseline is measured;
// the report gives the median. One run lasts a fraction of a second, and
// on a shared machine single runs of the same build differed by a sixth.
const rawCommitRuns = 3

// medianRawCommits is the median of rawCommitRuns runs of
// storage.RawCommits, each on a table of its own (name gets a suffix on
// SQLite).
func medianRawCommits(ctx context.Context, driver, dsn string, n int) (float64, error) {
	runs := make([]float64, 0, rawCommitRuns)
	for i := range rawCommitRuns {
		d := dsn
		if driver == storage.DriverSQLite {
			d = fmt.Sprintf("%s.%d", dsn, i)
		}
		r, err := storage.RawCommits(ctx, driver, d, n)
		if err != nil {
			return 0, err
		}
		runs = append(runs, r)
	}
	slices.Sort(runs)
	return runs[len(runs)/2], nil
}
