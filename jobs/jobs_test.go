package jobs_test

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/airlockhq/airlock/internal/racetest"
	"github.com/airlockhq/airlock/jobs"
)

// ticks is an injected ticker: one unbuffered channel per interval, which
// the test sends on; a send completes only when a job's loop takes it.
type ticks struct {
	mu      sync.Mutex
	chans   map[time.Duration]chan time.Time
	asked   []time.Duration
	stopped int
}

func newTicks() *ticks { return &ticks{chans: map[time.Duration]chan time.Time{}} }

func (k *ticks) ch(d time.Duration) chan time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	c, ok := k.chans[d]
	if !ok {
		c = make(chan time.Time)
		k.chans[d] = c
	}
	return c
}

func (k *ticks) ticker(d time.Duration) (<-chan time.Time, func()) {
	c := k.ch(d)
	k.mu.Lock()
	k.asked = append(k.asked, d)
	k.mu.Unlock()
	return c, func() { k.mu.Lock(); k.stopped++; k.mu.Unlock() }
}

// tick sends one tick of interval d and returns once a loop took it.
func (k *ticks) tick(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case k.ch(d) <- time.Now():
	case <-time.After(10 * time.Second):
		t.Fatalf("no job took a tick of %v", d)
	}
}

// offer tries to send a tick of d without waiting, many times, yielding
// between tries; it reports whether one was taken.
func (k *ticks) offer(d time.Duration) bool {
	for range 2000 {
		select {
		case k.ch(d) <- time.Now():
			return true
		default:
		}
		runtime.Gosched()
	}
	return false
}

// logs records log records.
type logs struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (l *logs) Enabled(context.Context, slog.Level) bool { return true }
func (l *logs) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, r.Clone())
	return nil
}
func (l *logs) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logs) WithGroup(string) slog.Handler      { return l }

// find returns the attributes of the first record whose message holds msg.
func (l *logs) find(msg string) map[string]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.recs {
		if strings.Contains(r.Message, msg) {
			attrs := map[string]string{"level": r.Level.String()}
			r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
			return attrs
		}
	}
	return nil
}

// rig is a runner with an injected ticker, a log and a registry.
type rig struct {
	ticks *ticks
	logs  *logs
	reg   *prometheus.Registry
	r     *jobs.Runner
}

func newRig() *rig {
	g := &rig{ticks: newTicks(), logs: &logs{}, reg: prometheus.NewRegistry()}
	g.r = jobs.New(jobs.Options{Logger: slog.New(g.logs), Registerer: g.reg, Ticker: g.ticks.ticker})
	return g
}

func (g *rig) add(t *testing.T, js ...jobs.Job) {
	t.Helper()
	for _, j := range js {
		if err := g.r.Add(j); err != nil {
			t.Fatal(err)
		}
	}
}

func (g *rig) start(t *testing.T) {
	t.Helper()
	if err := g.r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.r.Stop(context.Background()) })
}

// stop stops the runner and waits for its runs: what they counted is
// final after it.
func (g *rig) stop(t *testing.T) {
	t.Helper()
	if err := g.r.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// runs is how many runs of job airlock_job_seconds counted, and errors
// how many airlock_job_errors_total did; -1 when the series is absent.
func (g *rig) runs(t *testing.T, job string) int {
	m := series(t, g.reg, jobs.SecondsMetric, job)
	if m == nil {
		return -1
	}
	return int(m.GetHistogram().GetSampleCount())
}

func (g *rig) errors(t *testing.T, job string) int {
	m := series(t, g.reg, jobs.ErrorsMetric, job)
	if m == nil {
		return -1
	}
	return int(m.GetCounter().GetValue())
}

func series(t *testing.T, reg *prometheus.Registry, name, job string) *dto.Metric {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "job" && l.GetValue() == job {
					return m
				}
			}
		}
	}
	return nil
}

func wait[T any](t *testing.T, c <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not happen", what)
		var zero T
		return zero
	}
}

// TestIntervals: each job waits on a ticker of its own interval and runs
// once a tick; AtStart runs once before any tick; the series of every
// job exist, at zero, before it ran.
func TestIntervals(t *testing.T) {
	g := newRig()
	ran := make(chan string, 100)
	job := func(name string) func(context.Context) error {
		return func(context.Context) error { ran <- name; return nil }
	}
	g.add(t,
		jobs.Job{Name: "often", Every: time.Second, Timeout: time.Minute, Run: job("often")},
		jobs.Job{Name: "rarely", Every: time.Hour, Timeout: time.Minute, AtStart: true, Run: job("rarely")},
	)
	if g.runs(t, "often") != 0 || g.errors(t, "often") != 0 || g.runs(t, "rarely") != 0 || g.errors(t, "rarely") != 0 {
		t.Fatal("a job's series are not there at zero before it ran")
	}
	g.start(t)
	if got := wait(t, ran, "the run at start"); got != "rarely" {
		t.Fatalf("ran %q at start, want rarely", got)
	}
	for range 3 {
		g.ticks.tick(t, time.Second)
		if got := wait(t, ran, "a run of often"); got != "often" {
			t.Fatalf("a tick of 1s ran %q", got)
		}
	}
	g.ticks.tick(t, time.Hour)
	if got := wait(t, ran, "a run of rarely"); got != "rarely" {
		t.Fatalf("a tick of 1h ran %q", got)
	}
	g.stop(t)
	if n := g.runs(t, "often"); n != 3 {
		t.Errorf("often ran %d times, want 3", n)
	}
	if n := g.runs(t, "rarely"); n != 2 {
		t.Errorf("rarely ran %d times, want 2", n)
	}
	if len(ran) != 0 {
		t.Errorf("%d runs more than ticks", len(ran))
	}
	g.ticks.mu.Lock()
	defer g.ticks.mu.Unlock()
	if len(g.ticks.asked) != 2 || g.ticks.stopped != 2 {
		t.Errorf("tickers asked %v, stopped %d; want one each of 1s and 1h, both stopped", g.ticks.asked, g.ticks.stopped)
	}
}

// TestTimeoutCancelsRun: a run's context ends at the job's timeout; the
// run counts as an error, is logged as timed out with the job's name, and
// the job runs again at its next tick.
func TestTimeoutCancelsRun(t *testing.T) {
	g := newRig()
	const timeout = 20 * time.Millisecond
	type seen struct {
		left time.Duration
		err  error
	}
	out := make(chan seen, 10)
	var n atomic.Int64
	g.add(t, jobs.Job{Name: "slow", Every: time.Second, Timeout: timeout, Run: func(ctx context.Context) error {
		if n.Add(1) > 1 {
			out <- seen{}
			return nil // quick this time
		}
		dl, ok := ctx.Deadline()
		if !ok {
			out <- seen{err: errors.New("no deadline")}
			return nil
		}
		left := time.Until(dl)
		<-ctx.Done() // a hung call that honours its context
		out <- seen{left: left, err: ctx.Err()}
		return ctx.Err()
	}})
	g.start(t)
	g.ticks.tick(t, time.Second)
	s := wait(t, out, "the end of the run")
	if !errors.Is(s.err, context.DeadlineExceeded) || s.left <= 0 || s.left > timeout {
		t.Fatalf("run ended with %v, %v left at its start; want the deadline, at most %v", s.err, s.left, timeout)
	}
	g.ticks.tick(t, time.Second) // taken once the first run is counted: the runner goes on
	wait(t, out, "the second run")
	g.stop(t)
	if e, r := g.errors(t, "slow"), g.runs(t, "slow"); e != 1 || r != 2 {
		t.Errorf("slow: %d errors of %d runs, want 1 of 2", e, r)
	}
	if a := g.logs.find("job timed out"); a == nil || a["job"] != "slow" || a["timeout"] != timeout.String() || a["level"] != "ERROR" {
		t.Errorf("timeout log: %v", a)
	}
}

// TestPanicRecovered: a panicking run is recovered, logged with the job's
// name, the panic and its stack, and counted as an error; the job runs
// again at its next tick and the other jobs go on.
func TestPanicRecovered(t *testing.T) {
	g := newRig()
	var n atomic.Int64
	ran := make(chan string, 10)
	g.add(t,
		jobs.Job{Name: "fragile", Every: time.Second, Timeout: time.Minute, Run: func(context.Context) error {
			if n.Add(1) == 1 {
				var m map[string]int
				//lint:ignore SA5000 the test wants a runtime panic, as a bug in a job would raise
				m["boom"]++ // a nil-map write: a runtime panic
			}
			ran <- "fragile"
			return nil
		}},
		jobs.Job{Name: "steady", Every: time.Minute, Timeout: time.Minute, Run: func(context.Context) error {
			ran <- "steady"
			return nil
		}},
	)
	g.start(t)
	g.ticks.tick(t, time.Second) // panics
	g.ticks.tick(t, time.Second) // taken only once the panicked run is over
	if got := wait(t, ran, "the run after the panic"); got != "fragile" {
		t.Fatalf("got %q", got)
	}
	g.ticks.tick(t, time.Minute)
	wait(t, ran, "the other job's run")
	g.stop(t)
	if e, r := g.errors(t, "fragile"), g.runs(t, "fragile"); e != 1 || r != 2 {
		t.Errorf("fragile: %d errors of %d runs, want 1 of 2", e, r)
	}
	if e := g.errors(t, "steady"); e != 0 {
		t.Errorf("steady: %d errors", e)
	}
	a := g.logs.find("job panicked")
	if a == nil || a["job"] != "fragile" || !strings.Contains(a["panic"], "nil map") || !strings.Contains(a["stack"], "jobs_test.TestPanicRecovered") {
		t.Errorf("panic log: %v", a)
	}
}

// TestFailureLogged: a run's error is logged with the job's name and
// counted; a success after it is not.
func TestFailureLogged(t *testing.T) {
	g := newRig()
	var n atomic.Int64
	done := make(chan struct{}, 10)
	g.add(t, jobs.Job{Name: "flaky", Every: time.Second, Timeout: time.Minute, Run: func(context.Context) error {
		defer func() { done <- struct{}{} }()
		if n.Add(1) == 1 {
			return errors.New("database is down")
		}
		return nil
	}})
	g.start(t)
	g.ticks.tick(t, time.Second)
	g.ticks.tick(t, time.Second)
	wait(t, done, "run 1")
	wait(t, done, "run 2")
	g.stop(t)
	if e := g.errors(t, "flaky"); e != 1 {
		t.Errorf("%d errors, want 1", e)
	}
	if a := g.logs.find("job failed"); a == nil || a["job"] != "flaky" || a["err"] != "database is down" {
		t.Errorf("failure log: %v", a)
	}
}

// TestNoSelfOverlap: while a run is in progress its job takes no tick (a
// ticker drops what nobody takes), so a slow run never has a second one
// beside it nor a queue of them after; other jobs go on meanwhile.
func TestNoSelfOverlap(t *testing.T) {
	g := newRig()
	var running racetest.Peak
	var total atomic.Int64
	started := make(chan struct{}, 10)
	release := make(chan struct{})
	other := make(chan struct{}, 10)
	g.add(t,
		jobs.Job{Name: "slow", Every: time.Second, Timeout: time.Minute, Run: func(ctx context.Context) error {
			defer running.Enter()()
			total.Add(1)
			started <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done(): // the test failed and stops the runner
			}
			return nil
		}},
		jobs.Job{Name: "other", Every: time.Minute, Timeout: time.Minute, Run: func(context.Context) error {
			other <- struct{}{}
			return nil
		}},
	)
	g.start(t)
	g.ticks.tick(t, time.Second)
	wait(t, started, "run 1")
	if g.ticks.offer(time.Second) {
		t.Fatal("a tick was taken while the job's run was in progress")
	}
	g.ticks.tick(t, time.Minute) // another job is not held up
	wait(t, other, "the other job's run")
	release <- struct{}{}
	g.ticks.tick(t, time.Second) // taken once run 1 is over
	wait(t, started, "run 2")
	release <- struct{}{}
	g.stop(t)
	if m, n := running.Most(), total.Load(); m != 1 || n != 2 {
		t.Fatalf("%d runs, at most %d at once; want 2, one at a time", n, m)
	}
}

// TestStopWaitsForRuns: Stop ends the runs' contexts and waits for them
// to return (or for its own context); a run cut off by the stop is not an
// error; no tick is taken after it, and the tickers are stopped.
func TestStopWaitsForRuns(t *testing.T) {
	g := newRig()
	started := make(chan struct{}, 1)
	stopped := make(chan struct{}, 1)
	release := make(chan struct{})
	var finished atomic.Bool
	g.add(t, jobs.Job{Name: "busy", Every: time.Second, Timeout: time.Minute, Run: func(ctx context.Context) error {
		started <- struct{}{}
		<-ctx.Done()
		stopped <- struct{}{}
		<-release // finishing what it started
		finished.Store(true)
		return ctx.Err()
	}})
	g.start(t)
	var once sync.Once
	finish := func() { once.Do(func() { close(release) }) }
	t.Cleanup(finish) // before the runner's stop, should the test fail
	g.ticks.tick(t, time.Second)
	wait(t, started, "the run")
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if err := g.r.Stop(gone); !errors.Is(err, context.Canceled) {
		t.Fatalf("Stop returned %v while a run was in progress; want its context's error", err)
	}
	wait(t, stopped, "the run's context ending at Stop")
	finish()
	if err := g.r.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !finished.Load() {
		t.Fatal("Stop returned before the run did")
	}
	if g.ticks.offer(time.Second) {
		t.Fatal("a tick was taken after Stop")
	}
	if e := g.errors(t, "busy"); e != 0 {
		t.Errorf("a run cut off by the stop counted %d errors", e)
	}
	g.ticks.mu.Lock()
	defer g.ticks.mu.Unlock()
	if g.ticks.stopped != 1 {
		t.Errorf("%d tickers stopped, want 1", g.ticks.stopped)
	}
}

// TestRunStopsWithContext: Run returns once its context ends and the run
// in progress returned.
func TestRunStopsWithContext(t *testing.T) {
	g := newRig()
	started := make(chan struct{}, 1)
	var finished atomic.Bool
	g.add(t, jobs.Job{Name: "j", Every: time.Second, Timeout: time.Minute, AtStart: true, Run: func(ctx context.Context) error {
		started <- struct{}{}
		<-ctx.Done()
		finished.Store(true)
		return nil
	}})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- g.r.Run(ctx) }()
	wait(t, started, "the run at start")
	cancel()
	if err := wait(t, done, "Run's return"); err != nil || !finished.Load() {
		t.Fatalf("Run = %v, run finished %v", err, finished.Load())
	}
	if err := g.r.Run(t.Context()); !errors.Is(err, jobs.ErrStarted) {
		t.Fatalf("a second Run = %v, want ErrStarted", err)
	}
}

// TestAddRefuses: a job without a name, function, interval or timeout,
// a second job of a name, and any job once started are refused with an
// error naming the job, and nothing is added.
func TestAddRefuses(t *testing.T) {
	ok := func(context.Context) error { return nil }
	g := newRig()
	g.add(t, jobs.Job{Name: "a", Every: time.Second, Timeout: time.Second, Run: ok})
	for _, c := range []struct {
		job  jobs.Job
		want string
	}{
		{jobs.Job{Every: time.Second, Timeout: time.Second, Run: ok}, "needs a name"},
		{jobs.Job{Name: "b", Every: time.Second, Timeout: time.Second}, `"b" has no function`},
		{jobs.Job{Name: "b", Timeout: time.Second, Run: ok}, `"b": the interval`},
		{jobs.Job{Name: "b", Every: time.Second, Timeout: -time.Second, Run: ok}, `"b": the timeout`},
		{jobs.Job{Name: "a", Every: time.Minute, Timeout: time.Second, Run: ok}, `"a" was already added`},
	} {
		if err := g.r.Add(c.job); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Add(%+v) = %v, want %q", c.job, err, c.want)
		}
	}
	if g.runs(t, "b") != -1 {
		t.Error("a refused job has series")
	}
	g.start(t)
	if err := g.r.Add(jobs.Job{Name: "late", Every: time.Second, Timeout: time.Second, Run: ok}); !errors.Is(err, jobs.ErrStarted) || !strings.Contains(err.Error(), "late") {
		t.Errorf("Add after Start = %v", err)
	}
	g.stop(t)
	g.ticks.mu.Lock()
	defer g.ticks.mu.Unlock()
	if len(g.ticks.asked) != 1 || g.ticks.asked[0] != time.Second {
		t.Errorf("tickers asked %v, want the one of job a", g.ticks.asked)
	}
}

// TestRunnersShareARegistry: two runners on one registry (the process's
// and, say, a command's) register without conflict and count in one set
// of series.
func TestRunnersShareARegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	done := make(chan struct{}, 2)
	for _, name := range []string{"one", "two"} {
		k := newTicks()
		r := jobs.New(jobs.Options{Registerer: reg, Ticker: k.ticker})
		if err := r.Add(jobs.Job{Name: name, Every: time.Second, Timeout: time.Second, AtStart: true,
			Run: func(context.Context) error { done <- struct{}{}; return nil }}); err != nil {
			t.Fatal(err)
		}
		if err := r.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		wait(t, done, "the run of "+name)
		if err := r.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"one", "two"} {
		if m := series(t, reg, jobs.SecondsMetric, name); m == nil || m.GetHistogram().GetSampleCount() != 1 {
			t.Errorf("runs of %s: %v", name, m)
		}
	}
}

// A wake-up runs a job between its ticks; wake-ups that come during a run
// are coalesced into one more run.
func TestWakeRunsBetweenTicks(t *testing.T) {
	wake := make(chan struct{}, 1)
	var runs atomic.Int32
	release := make(chan struct{})
	r := jobs.New(jobs.Options{})
	if err := r.Add(jobs.Job{Name: "w", Every: time.Hour, Timeout: time.Minute, Wake: wake, Run: func(context.Context) error {
		if runs.Add(1) == 1 {
			<-release
		}
		return nil
	}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	wake <- struct{}{}
	waitFor(t, func() bool { return runs.Load() == 1 })
	for range 3 { // during the run: one is kept, the others dropped by the sender
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	close(release)
	waitFor(t, func() bool { return runs.Load() == 2 })
	time.Sleep(50 * time.Millisecond)
	if n := runs.Load(); n != 2 {
		t.Fatalf("%d runs, want 2", n)
	}
	_ = r.Stop(context.Background())
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(time.Millisecond)
	}
}
