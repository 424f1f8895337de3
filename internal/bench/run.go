package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/storage"
)

// runBench sets the bench up (its database, the fake Slack, Airlock's
// process), measures, and then the raw commits once Airlock has stopped.
func runBench(ctx context.Context, o options, stderr io.Writer, h HTTP) (*Report, error) {
	dir, err := os.MkdirTemp("", "airlock-bench")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	dsn, drop, err := database(ctx, o, dir)
	if err != nil {
		return nil, err
	}
	defer drop()

	fake := newFakeSlack(o.cards)
	fakeSrv, fakeURL, err := serve(h, fake)
	if err != nil {
		return nil, err
	}
	defer fakeSrv.Close()
	air, err := startProcess(ctx, o, dsn, fakeURL, stderr)
	if err != nil {
		return nil, err
	}
	defer air.stop()
	// The fakes and the clients run on one P: they need less than a core,
	// and more Ps would only spin beside Airlock's on the same cores. The
	// raw commits, after, get them all, as Airlock's process does.
	procs := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(procs)
	client := newClient(o.clickers)
	defer client.CloseIdleConnections()

	r := &benchRun{o: o, fake: fake, air: air, client: client, stderr: stderr,
		events: air.hello.Events + "/slack/events", rep: &Report{Driver: o.driver, Cards: o.cards, Clickers: o.clickers}}
	if err := r.measure(ctx); err != nil {
		return nil, err
	}
	// The baselines' raw commits, once Airlock has stopped.
	if err := air.stop(); err != nil {
		return nil, err
	}
	runtime.GOMAXPROCS(procs)
	if err := r.rawCommits(ctx, filepath.Join(dir, "raw.db"), dsn); err != nil {
		return nil, err
	}
	r.rep.targets()
	return r.rep, nil
}

// database is the DSN Airlock's process uses: a fresh schema on
// PostgreSQL (drop drops it), -dsn or a file in dir on SQLite.
func database(ctx context.Context, o options, dir string) (dsn string, drop func(), err error) {
	switch {
	case o.driver == storage.DriverPostgres:
		return postgresSchema(ctx, o.dsn)
	case o.dsn == "":
		return filepath.Join(dir, "airlock.db"), func() {}, nil
	default:
		return o.dsn, func() {}, nil
	}
}

// benchRun is one run's parts and its report as it fills.
type benchRun struct {
	o      options
	fake   *fakeSlack
	air    *process
	client *http.Client
	events string // Airlock's /slack/events
	stderr io.Writer
	rep    *Report
	bodies [][]byte        // each card's Allow click
	loaded []time.Duration // -probe: the bare handler's latencies while Airlock decided
}

// measure makes the cards, then clicks them, first on the bare handler
// and then on Airlock, and checks that every decision ran once.
func (r *benchRun) measure(ctx context.Context) error {
	if err := r.cards(ctx); err != nil {
		return err
	}
	// The clicks' bodies are made beforehand, so that the clickers' CPU
	// does not compete with Airlock's for the cores.
	r.bodies = make([][]byte, r.o.cards)
	for i := range r.bodies {
		r.bodies[i] = clickBody(i, r.fake.ref(i), r.fake.cardTS(i))
	}
	bare, err := r.bareClicks(ctx)
	if err != nil {
		return err
	}
	acks, err := r.decide(ctx)
	if err != nil {
		return err
	}
	r.latencies(bare, acks)
	return r.verify()
}

// cards makes the cards: one mention each, -clickers creators, each
// waiting for its card before the next mention. They are made in two
// halves with the memory sampled between: the second half's growth is
// what a pending card costs once the pools, caches and stacks are warm.
func (r *benchRun) cards(ctx context.Context) error {
	before, settledBefore, err := r.air.memories(false)
	if err != nil {
		return err
	}
	r.rep.GOMAXPROCS, r.rep.AirlockPID = before.Procs, before.PID
	half := r.o.cards / 2
	start := time.Now()
	if err := parallel(ctx, half, r.o.clickers, func(i int) error { return r.mention(ctx, i) }); err != nil {
		return err
	}
	took := time.Since(start)
	atHalf, err := r.air.memory(true, false)
	if err != nil {
		return err
	}
	start = time.Now()
	if err := parallel(ctx, r.o.cards-half, r.o.clickers, func(i int) error { return r.mention(ctx, half+i) }); err != nil {
		return err
	}
	r.rep.CardsSeconds = (took + time.Since(start)).Seconds()
	return r.pendingMemory(before, settledBefore, atHalf)
}

// mention posts the mention that makes card i and waits for the card.
func (r *benchRun) mention(ctx context.Context, i int) error {
	posted := r.fake.await(i)
	if _, err := post(ctx, r.client, r.events, "application/json", mentionBody(i)); err != nil {
		return fmt.Errorf("mention %d: %w", i, err)
	}
	select {
	case <-posted:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("card %d was not posted: %w", i, ctx.Err())
	}
}

// pendingMemory samples Airlock's memory with every card pending, sets
// the figures per card against the samples before and at half, and
// writes the heap profile (-memprofile).
func (r *benchRun) pendingMemory(before, settledBefore, atHalf figures) error {
	pending, settledPending, err := r.air.memories(true)
	if err != nil {
		return err
	}
	cards := float64(r.o.cards)
	r.rep.RSSBeforeBytes, r.rep.RSSPendingBytes = before.RSS, pending.RSS
	r.rep.RSSPeakCardsBytes = pending.Peak
	r.rep.RSSPerCardBytes = float64(pending.RSS-before.RSS) / cards
	r.rep.RSSPerCardSettledBytes = float64(settledPending.RSS-settledBefore.RSS) / cards
	r.rep.HeapPerCardBytes = float64(pending.HeapLive-before.HeapLive) / cards
	if n := r.o.cards - r.o.cards/2; n > 0 {
		r.rep.RSSPerCardSecondHalfBytes = float64(pending.RSS-atHalf.RSS) / float64(n)
	}
	if r.o.memprofile != "" {
		return r.air.profile("heap", r.o.memprofile)
	}
	return nil
}

// timed is the clicks' latencies: from sending to the whole answer read
// (lat), and from sending to the handler's start (wait; the two
// processes read one clock).
type timed struct{ lat, wait []time.Duration }

// click sends every card's click to u, -clickers at a time.
func (r *benchRun) click(ctx context.Context, u string) (timed, error) {
	t := timed{lat: make([]time.Duration, r.o.cards), wait: make([]time.Duration, r.o.cards)}
	return t, parallel(ctx, r.o.cards, r.o.clickers, func(i int) error {
		t0 := time.Now()
		started, err := post(ctx, r.client, u, "application/x-www-form-urlencoded", r.bodies[i])
		t.lat[i] = time.Since(t0)
		if err != nil {
			return fmt.Errorf("click %d: %w", i, err)
		}
		if started.IsZero() {
			return fmt.Errorf("click %d: the answer lacks %s", i, startHeader)
		}
		t.wait[i] = max(started.Sub(t0), 0)
		return nil
	})
}

// bareClicks sends the clicks to the bare handler, the baseline, and
// sets its CPU per request.
func (r *benchRun) bareClicks(ctx context.Context) (timed, error) {
	cpu0, err := r.air.cpu()
	if err != nil {
		return timed{}, err
	}
	bare, err := r.click(ctx, r.air.hello.Bare+"/slack/events")
	if err != nil {
		return timed{}, err
	}
	cpu1, err := r.air.cpu()
	if err != nil {
		return timed{}, err
	}
	r.rep.BareCPUMsPerRequest = float64(cpu1.CPU-cpu0.CPU) / float64(time.Millisecond) / float64(r.o.cards)
	r.rep.RSSPeakBareBytes = cpu1.Peak
	return bare, nil
}

// decide sends the clicks to Airlock and waits until every decision is
// finished: the span of Airlock's CPU per decision (and the bench's own),
// of its CPU profile (-cpuprofile) and of the handler's ack histogram.
func (r *benchRun) decide(ctx context.Context) (timed, error) {
	acked0, err := ackHistogram(ctx, r.client, r.air.hello.Events)
	if err != nil {
		return timed{}, err
	}
	if r.o.cpuprofile != "" {
		if err := r.air.profile("cpu-start", r.o.cpuprofile); err != nil {
			return timed{}, err
		}
	}
	cpu0, err := r.air.cpu()
	if err != nil {
		return timed{}, err
	}
	harness0 := cpuTime()
	acks, first, err := r.probedClicks(ctx)
	if err != nil {
		return timed{}, err
	}
	select {
	case <-r.fake.allDone:
	case <-ctx.Done():
		return timed{}, fmt.Errorf("%d of %d decisions finished: %w", r.fake.doneCount.Load(), r.o.cards, ctx.Err())
	}
	last := time.Unix(0, r.fake.lastDone.Load())
	harness := cpuTime() - harness0
	cpu1, err := r.air.cpu()
	if err != nil {
		return timed{}, err
	}
	if r.o.cpuprofile != "" {
		if err := r.air.profile("cpu-stop", ""); err != nil {
			return timed{}, err
		}
	}
	acked1, err := ackHistogram(ctx, r.client, r.air.hello.Events)
	if err != nil {
		return timed{}, err
	}
	r.rep.AckServerP99AtMostMs = -1 // past the last bound
	if q := bucketQuantile(acked0, acked1, 0.99); !math.IsInf(q, 1) {
		r.rep.AckServerP99AtMostMs = q * 1000
	}
	r.decisions(last.Sub(first), cpu0, cpu1, harness)
	return acks, nil
}

// probedClicks sends the clicks to Airlock and, with -probe, the bare
// handler's requests beside them (into r.loaded); first is when the
// clicks began.
func (r *benchRun) probedClicks(ctx context.Context) (acks timed, first time.Time, err error) {
	var probed func() []time.Duration
	if r.o.probe > 0 {
		probed = probe(ctx, r.air.hello.Bare+"/slack/events", r.bodies[0], r.o.probe)
	}
	first = time.Now()
	acks, err = r.click(ctx, r.events)
	if probed != nil {
		r.loaded = probed()
	}
	return acks, first, err
}

// decisions sets the decision figures: over took, from the first click
// to the last decision finished, with Airlock's CPU samples at its ends
// and the bench's own CPU (harness) between them.
func (r *benchRun) decisions(took time.Duration, cpu0, cpu1 figures, harness time.Duration) {
	rep := r.rep
	rep.Decisions = int(r.fake.doneCount.Load())
	rep.DecisionSeconds = took.Seconds()
	rep.DecisionsPerSecond = float64(rep.Decisions) / rep.DecisionSeconds
	rep.CPUMsPerDecision = float64(cpu1.CPU-cpu0.CPU) / float64(time.Millisecond) / float64(rep.Decisions)
	rep.HarnessCPUMsPerDecision = float64(harness) / float64(time.Millisecond) / float64(rep.Decisions)
	rep.RSSPeakBytes = cpu1.Peak
	if rep.RSSPendingBytes > 0 {
		rep.PeakOverPending = float64(rep.RSSPeakBytes) / float64(rep.RSSPendingBytes)
	}
}

// latencies sets the ack and wait quantiles of the clicks on Airlock
// against the bare handler's, and the loaded bare handler's (-probe).
func (r *benchRun) latencies(bare, acks timed) {
	rep := r.rep
	rep.BareP50Ms, rep.BareP99Ms = quantileMs(bare.lat, 0.50), quantileMs(bare.lat, 0.99)
	rep.AckP50Ms, rep.AckP99Ms = quantileMs(acks.lat, 0.50), quantileMs(acks.lat, 0.99)
	rep.AckP99OverBare = rep.AckP99Ms / rep.BareP99Ms
	if len(r.loaded) > 0 {
		rep.LoadedBareRequests = len(r.loaded)
		rep.LoadedBareP50Ms, rep.LoadedBareP99Ms = quantileMs(r.loaded, 0.50), quantileMs(r.loaded, 0.99)
		rep.AckP99OverLoadedBare = rep.AckP99Ms / rep.LoadedBareP99Ms
	}
	rep.BareWaitP50Ms, rep.BareWaitP99Ms = quantileMs(bare.wait, 0.50), quantileMs(bare.wait, 0.99)
	rep.AckWaitP50Ms, rep.AckWaitP99Ms = quantileMs(acks.wait, 0.50), quantileMs(acks.wait, 0.99)
}

// verify checks that every batch is done and every tool ran exactly once.
func (r *benchRun) verify() error {
	reply, err := r.air.do(controlRequest{Op: "result"})
	if err != nil {
		return err
	}
	res := reply.Result
	if res == nil {
		return errors.New("airlock result: no runs")
	}
	rep := r.rep
	rep.CardUpdates = r.fake.updates.Load()
	rep.Refusals = r.fake.ephemerals.Load()
	rep.UnexpectedPosts = r.fake.unexpected.Load()
	rep.ToolRuns = res.ToolRuns
	rep.ExactlyOnce = res.Open == 0 && res.ToolRuns == int64(r.o.cards) && len(res.Runs) == r.o.cards
	for i := range r.o.cards {
		if id, _, err := confirm.ParseRef(r.fake.ref(i)); err != nil || res.Runs[id] != 1 {
			rep.ExactlyOnce = false
		}
	}
	if res.Open > 0 {
		fmt.Fprintf(r.stderr, "airlock bench: %d batches not done\n", res.Open)
	}
	return nil
}

// rawCommits measures the baselines' raw commits: SQLite's in a file at
// rawPath, and with PostgreSQL the server's on dsn.
func (r *benchRun) rawCommits(ctx context.Context, rawPath, dsn string) error {
	n := max(2000, min(20000, 4*r.o.cards))
	var err error
	if r.rep.RawSQLiteCommitsPerSecond, err = medianRawCommits(ctx, storage.DriverSQLite, rawPath, n); err != nil {
		return err
	}
	raw := r.rep.RawSQLiteCommitsPerSecond
	if r.o.driver == storage.DriverPostgres {
		if r.rep.RawPostgresCommitsPerSecond, err = medianRawCommits(ctx, storage.DriverPostgres, dsn, n); err != nil {
			return err
		}
		raw = r.rep.RawPostgresCommitsPerSecond
	}
	r.rep.DecisionsOverRawCommits = r.rep.DecisionsPerSecond / raw
	return nil
}
