// Package jobs runs Airlock's background work as named jobs, each on its
// own interval with a deadline, and measures every run in
// airlock_job_seconds{job} and airlock_job_errors_total{job}. A run that
// fails or panics is logged with its job's name and counted; the runner
// goes on, and a job never overlaps itself.
package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Job is one named piece of background work.
type Job struct {
	// Name names the job in logs and in the metrics' job label.
	Name string
	// Every is the interval between runs. A run that takes longer makes
	// the runner skip the ticks it missed: runs of one job never overlap.
	Every time.Duration
	// Timeout is the deadline of one run: its context ends then, and a
	// run that returns its error counts as failed. Run must return once
	// its context ends; the runner waits for it when it stops.
	Timeout time.Duration
	// AtStart runs the job once when the runner starts, before the first
	// interval has passed.
	AtStart bool
	// Wake, when set, runs the job at once on a receive, between ticks
	// (a run in progress covers a wake-up that comes meanwhile only if the
	// sender's channel holds it: a buffer of one coalesces wake-ups).
	Wake <-chan struct{}
	// Run does the work.
	Run func(context.Context) error
}

// Options configure a Runner; zero fields take the defaults.
type Options struct {
	// Logger receives a line for every failed or panicked run; default
	// none.
	Logger *slog.Logger
	// Registerer gets the runner's metrics; default none (they are kept
	// but not served). Runners sharing a registerer share the metrics.
	Registerer prometheus.Registerer
	// Ticker starts the ticker a job waits on and returns its channel and
	// its stop; default time.NewTicker, which drops ticks a slow receiver
	// misses. Tests inject one they drive.
	Ticker func(d time.Duration) (<-chan time.Time, func())
}

// ErrStarted: jobs are added before the runner starts, and it starts once.
var ErrStarted = errors.New("jobs: the runner has already started")

// Runner runs jobs until it is stopped. Create it with New.
type Runner struct {
	log     *slog.Logger
	ticker  func(time.Duration) (<-chan time.Time, func())
	metrics *metrics

	mu      sync.Mutex
	jobs    []Job
	started bool
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// New returns a runner without jobs. It panics only when the registerer
// holds other collectors under the runner's metric names.
func New(opts Options) *Runner {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ticker := opts.Ticker
	if ticker == nil {
		ticker = func(d time.Duration) (<-chan time.Time, func()) {
			t := time.NewTicker(d)
			return t.C, t.Stop
		}
	}
	return &Runner{log: log, ticker: ticker, metrics: newMetrics(opts.Registerer)}
}

// Add adds a job. It refuses, changing nothing, a job without a name or
// function, with a name already added, or with an interval or timeout
// that is not positive, and any job once the runner has started.
func (r *Runner) Add(j Job) error {
	switch {
	case j.Name == "":
		return errors.New("jobs: a job needs a name")
	case j.Run == nil:
		return fmt.Errorf("jobs: job %q has no function", j.Name)
	case j.Every <= 0:
		return fmt.Errorf("jobs: job %q: the interval must be positive, not %v", j.Name, j.Every)
	case j.Timeout <= 0:
		return fmt.Errorf("jobs: job %q: the timeout must be positive, not %v", j.Name, j.Timeout)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started {
		return fmt.Errorf("add job %q: %w", j.Name, ErrStarted)
	}
	for _, o := range r.jobs {
		if o.Name == j.Name {
			return fmt.Errorf("jobs: a job named %q was already added", j.Name)
		}
	}
	r.jobs = append(r.jobs, j)
	r.metrics.declare(j.Name)
	return nil
}

// Start starts every job; they run until ctx ends or Stop is called.
func (r *Runner) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started {
		return ErrStarted
	}
	r.started = true
	ctx, r.cancel = context.WithCancel(ctx)
	for _, j := range r.jobs {
		r.wg.Go(func() { r.loop(ctx, j) })
	}
	return nil
}

// Stop ends the jobs' contexts and waits for the runs in progress to
// return, or for ctx to end (then it returns ctx's error and the runs go
// on). No run starts after Stop. It may be called again to wait longer.
func (r *Runner) Stop(ctx context.Context) error {
	r.mu.Lock()
	r.started = true // a runner never started stays stopped
	if r.cancel != nil {
		r.cancel()
	}
	r.mu.Unlock()
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Run starts the jobs and, once ctx ends, stops them and waits for the
// runs in progress. It returns nil then, or ErrStarted.
func (r *Runner) Run(ctx context.Context) error {
	if err := r.Start(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	return r.Stop(context.Background())
}

// loop runs one job on its ticker until ctx ends. A run happens in the
// loop itself, so ticks that come while it runs are not received: the
// ticker drops them.
func (r *Runner) loop(ctx context.Context, j Job) {
	tick, stop := r.ticker(j.Every)
	defer stop()
	if j.AtStart {
		r.once(ctx, j)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
			if ctx.Err() != nil {
				return
			}
			r.once(ctx, j)
		case <-j.Wake: // nil: never
			if ctx.Err() != nil {
				return
			}
			r.once(ctx, j)
		}
	}
}

// once runs the job once under its deadline, measures the run, and logs
// and counts its failure or panic. An error of a run cut off because the
// runner stops is not a failure; a panic always is.
func (r *Runner) once(ctx context.Context, j Job) {
	rctx, cancel := context.WithTimeout(ctx, j.Timeout)
	defer cancel()
	start := time.Now()
	err := r.call(rctx, j)
	r.metrics.observe(j.Name, time.Since(start))
	if err == nil {
		return
	}
	var p *panicError
	panicked := errors.As(err, &p)
	if !panicked && ctx.Err() != nil {
		return
	}
	r.metrics.failed(j.Name)
	switch {
	case panicked:
		r.log.Error("job panicked; it runs again at its next interval", "job", j.Name, "panic", p.value, "stack", string(p.stack))
	case errors.Is(rctx.Err(), context.DeadlineExceeded):
		r.log.Error("job timed out", "job", j.Name, "timeout", j.Timeout, "err", err)
	default:
		r.log.Error("job failed", "job", j.Name, "err", err)
	}
}

// call runs the job's function, turning a panic into a *panicError.
func (r *Runner) call(ctx context.Context, j Job) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &panicError{value: v, stack: debug.Stack()}
		}
	}()
	return j.Run(ctx)
}

// panicError is a run that panicked.
type panicError struct {
	value any
	stack []byte
}

func (p *panicError) Error() string { return fmt.Sprintf("panic: %v", p.value) }
