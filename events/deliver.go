package events

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/gateway"
	"github.com/airlockhq/airlock/internal/ids"
	"github.com/airlockhq/airlock/jobs"
	"github.com/airlockhq/airlock/storage"
)

// Defaults of Options.
const (
	DefaultInterval   = time.Second
	DefaultTimeout    = 10 * time.Second
	DefaultMinBackoff = time.Second
	DefaultMaxBackoff = 5 * time.Minute
	DefaultMaxAge     = 24 * time.Hour
	DefaultRetention  = 7 * 24 * time.Hour
	DefaultPruneEvery = time.Hour
	DefaultParallel   = 8
)

// Options tune a Deliverer; zero fields take the defaults.
type Options struct {
	// Worker names this replica in claims; default host/pid/random.
	Worker string
	// Now is the clock of attempts, backoff, claims and signatures;
	// default the database's clock (storage.DB.Clock), which replicas
	// share.
	Now func() time.Time
	// Ticker starts the ticker Run polls on and returns its channel and
	// its stop; default time.NewTicker. Tests inject one they drive.
	Ticker func(d time.Duration) (<-chan time.Time, func())
	// Interval between polls of Run; default 1s.
	Interval time.Duration
	// Timeout of one attempt (connect, send, answer); default 10s.
	Timeout time.Duration
	// ClaimTTL is how long a claim holds a delivery; default 2×Timeout +
	// 30s, so a live replica's claim never lapses mid-attempt and a dead
	// one's lapses soon.
	ClaimTTL time.Duration
	// Backoff after the n-th failed attempt: MinBackoff·2^(n-1), at most
	// MaxBackoff; defaults 1s and 5m.
	MinBackoff, MaxBackoff time.Duration
	// MaxAge: a delivery still failing this long after its first attempt
	// is dead; default 24h.
	MaxAge time.Duration
	// Retention: delivered rows older than this are pruned, every
	// PruneEvery; defaults 7 days and 1h.
	Retention, PruneEvery time.Duration
	// Parallel is how many deliveries to one webhook are in flight at
	// once (each of another conversation); default 8.
	Parallel int
	// Client sends the requests; default a plain client. Redirects are
	// never followed (a 3xx is a failed attempt), whatever the client.
	Client *http.Client
	Logger *slog.Logger
	// Metrics counts attempts by outcome (delivered, failed, dead);
	// *metrics.Metrics has it. Nil counts nothing.
	Metrics interface{ WebhookDelivery(status string) }
	// Callbacks are the gateway clients whose callbacks to send (those
	// with a callback_secret), each signed with its client's secret, to
	// the URL stored with it if the client's callback_urls still allow it.
	Callbacks []gateway.Client
}

// dest is where a target's deliveries go: a webhook's URL, or for a
// callback (url "") the URL stored with each delivery, which allowed
// checks.
type dest struct {
	id, name, url, secret string
	allowed               func(url string) error
}

// Outbox is what delivery needs of storage (*storage.DB has it): claims
// of the outbox's deliveries, their outcomes, pruning, and the clock
// replicas share.
type Outbox interface {
	ClaimDeliveries(ctx context.Context, target, worker string, now time.Time, ttl time.Duration, limit int) ([]storage.Delivery, error)
	MarkDelivered(ctx context.Context, id int64, now time.Time) (bool, error)
	MarkFailed(ctx context.Context, id int64, worker string, now, next time.Time, dead bool, lastErr string) (bool, error)
	PruneDeliveries(ctx context.Context, before time.Time) (int64, error)
	Clock() func() time.Time
}

var _ Outbox = (*storage.DB)(nil)

// Deliverer sends the outbox's deliveries to the webhooks. Several
// replicas may run one each on one database: claims keep each delivery
// with one replica at a time.
type Deliverer struct {
	db        Outbox
	dests     []dest
	opts      Options
	client    *http.Client
	log       *slog.Logger
	base      *slog.Logger // log without the job's name
	lastPrune time.Time
}

// NewDeliverer returns a deliverer of the webhooks' deliveries.
func NewDeliverer(db Outbox, hooks []Webhook, opts Options) *Deliverer {
	if opts.Worker == "" {
		host, _ := os.Hostname()
		opts.Worker = fmt.Sprintf("%s/%d/%s", host, os.Getpid(), ids.New()[:8])
	}
	if opts.Now == nil {
		opts.Now = db.Clock()
	}
	if opts.Ticker == nil {
		opts.Ticker = func(d time.Duration) (<-chan time.Time, func()) {
			t := time.NewTicker(d)
			return t.C, t.Stop
		}
	}
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&opts.Interval, DefaultInterval)
	def(&opts.Timeout, DefaultTimeout)
	def(&opts.ClaimTTL, 2*opts.Timeout+30*time.Second)
	def(&opts.MinBackoff, DefaultMinBackoff)
	def(&opts.MaxBackoff, DefaultMaxBackoff)
	def(&opts.MaxAge, DefaultMaxAge)
	def(&opts.Retention, DefaultRetention)
	def(&opts.PruneEvery, DefaultPruneEvery)
	if opts.Parallel <= 0 {
		opts.Parallel = DefaultParallel
	}
	client := &http.Client{}
	if opts.Client != nil {
		c := *opts.Client
		client = &c
	}
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var dests []dest
	for _, h := range hooks {
		dests = append(dests, dest{id: h.ID(), name: h.Name(), url: h.URL, secret: h.Secret})
	}
	for _, c := range opts.Callbacks {
		if c.CallbackSecret != "" {
			dests = append(dests, dest{id: gateway.CallbackTarget(c.Name), name: "callbacks of " + c.Name, secret: c.CallbackSecret, allowed: c.CallbackAllowed})
		}
	}
	return &Deliverer{
		db: db, dests: dests, opts: opts, client: client,
		log: log.With("job", "webhooks"), base: log,
	}
}

// Name names the job in logs and metrics.
func (d *Deliverer) Name() string { return "webhooks" }

// JobTimeout is the deadline of one run of the job: a run cut off leaves
// its claims to lapse, and the next run sends what is still due.
const JobTimeout = 5 * time.Minute

// Job is the deliverer's work for a jobs.Runner: at start and every
// Interval, it sends what is due (Poll) and prunes delivered rows at most
// every PruneEvery.
func (d *Deliverer) Job() jobs.Job {
	return jobs.Job{Name: d.Name(), Every: d.opts.Interval, Timeout: JobTimeout, AtStart: true, Run: d.tick}
}

func (d *Deliverer) tick(ctx context.Context) error {
	_, err := d.Poll(ctx)
	if err != nil {
		err = fmt.Errorf("deliver: %w", err)
	}
	if perr := d.prune(ctx); perr != nil {
		err = errors.Join(err, fmt.Errorf("prune deliveries: %w", perr))
	}
	return err
}

// Run runs Job on its own runner until ctx ends. Errors are logged, never
// returned: it returns nil when ctx ends.
func (d *Deliverer) Run(ctx context.Context) error {
	r := jobs.New(jobs.Options{Logger: d.base, Ticker: d.opts.Ticker})
	if err := r.Add(d.Job()); err != nil {
		return err
	}
	return r.Run(ctx)
}

// maxRounds bounds one Poll, so the job gets back to its pruning.
const maxRounds = 100

// Poll sends every delivery due now: each round claims the head of every
// conversation's queue of every webhook and sends them (in parallel across
// conversations); while a round delivers something, the next round sends
// the events that were waiting behind. It returns how many were delivered.
func (d *Deliverer) Poll(ctx context.Context) (int, error) {
	total := 0
	for range maxRounds {
		n, err := d.round(ctx)
		total += n
		if err != nil || n == 0 || ctx.Err() != nil {
			return total, err
		}
	}
	return total, nil
}

func (d *Deliverer) round(ctx context.Context) (int, error) {
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		delivered int
		errs      []error
	)
	for i := range d.dests {
		h := &d.dests[i]
		claims, err := d.db.ClaimDeliveries(ctx, h.id, d.opts.Worker, d.opts.Now(), d.opts.ClaimTTL, d.opts.Parallel)
		if err != nil {
			errs = append(errs, err)
		}
		for _, dl := range claims {
			wg.Go(func() {
				ok, err := d.deliver(ctx, h, dl)
				mu.Lock()
				defer mu.Unlock()
				if ok {
					delivered++
				}
				if err != nil {
					errs = append(errs, err)
				}
			})
		}
	}
	wg.Wait()
	return delivered, errors.Join(errs...)
}

// deliver makes one attempt of a claimed delivery and records its outcome.
func (d *Deliverer) deliver(ctx context.Context, h *dest, dl storage.Delivery) (bool, error) {
	sendErr := d.send(ctx, h, dl)
	if ctx.Err() != nil {
		// Stopping: the claim lapses and another attempt follows. A 2xx
		// is still recorded, so it is not sent again.
		if sendErr != nil {
			return false, nil
		}
	}
	rec, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	now := d.opts.Now()
	if sendErr == nil {
		if _, err := d.db.MarkDelivered(rec, dl.ID, now); err != nil {
			return false, err
		}
		d.count("delivered")
		return true, nil
	}
	first := now
	if dl.FirstAttemptAt != nil {
		first = *dl.FirstAttemptAt
	}
	dead := now.Sub(first) >= d.opts.MaxAge
	next := now.Add(d.backoff(dl.Attempts))
	if _, err := d.db.MarkFailed(rec, dl.ID, d.opts.Worker, now, next, dead, sendErr.Error()); err != nil {
		return false, err
	}
	attrs := []any{"webhook", h.name, "delivery", dl.ID, "event", dl.EventID, "type", dl.Type, "attempt", dl.Attempts, "err", sendErr}
	if dead {
		d.count("dead")
	} else {
		d.count("failed")
	}
	if dead {
		d.log.Error("webhook delivery is dead after retrying for "+d.opts.MaxAge.String()+"; later events of its conversation wait (airlock events retry ID)", attrs...)
	} else {
		d.log.Warn("webhook delivery failed", append(attrs, "retry_at", next)...)
	}
	return false, nil
}

// backoff is the wait after the n-th failed attempt.
func (d *Deliverer) backoff(n int) time.Duration {
	b := d.opts.MinBackoff
	for i := 1; i < n && b < d.opts.MaxBackoff; i++ {
		b *= 2
	}
	return min(b, d.opts.MaxBackoff)
}

// send POSTs the delivery's body, signed at the attempt's time; nil only
// for a 2xx answer.
func (d *Deliverer) send(ctx context.Context, h *dest, dl storage.Delivery) error {
	ctx, cancel := context.WithTimeout(ctx, d.opts.Timeout)
	defer cancel()
	to := h.url
	if h.allowed != nil { // a callback: its own URL; a webhook's is the config's
		if err := h.allowed(dl.URL); err != nil {
			return fmt.Errorf("callback URL: %w", err)
		}
		to = dl.URL
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, to, bytes.NewReader(dl.Body))
	if err != nil {
		return fmt.Errorf("request: %v", stripURL(err))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "airlock-webhooks")
	req.Header.Set(EventIDHeader, dl.EventID)
	req.Header.Set(SignatureHeader, Sign(h.secret, d.opts.Now(), dl.Body))
	resp, err := d.client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
			return fmt.Errorf("no answer within %v", d.opts.Timeout)
		}
		return stripURL(err)
	}
	defer resp.Body.Close()
	head, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // lets the connection be reused
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		msg := fmt.Sprintf("HTTP %d", resp.StatusCode)
		if s := printable(string(head)); s != "" {
			msg += ": " + s
		}
		return errors.New(msg)
	}
	return nil
}

// stripURL drops the URL a transport error names: its path or query may
// hold a token, and the error is stored and logged.
func stripURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", strings.ToLower(ue.Op), ue.Err)
	}
	return err
}

// printable keeps a receiver's answer to one line of printable text.
func printable(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return ' '
	}, s)
	return card.OneLine(s)
}

// prune deletes delivered rows older than Retention, at most every
// PruneEvery.
func (d *Deliverer) prune(ctx context.Context) error {
	now := d.opts.Now()
	if !d.lastPrune.IsZero() && now.Sub(d.lastPrune) < d.opts.PruneEvery {
		return nil
	}
	d.lastPrune = now
	n, err := d.db.PruneDeliveries(ctx, now.Add(-d.opts.Retention))
	if n > 0 {
		d.log.Info("pruned delivered webhook events", "rows", n)
	}
	return err
}

func (d *Deliverer) count(status string) {
	if d.opts.Metrics != nil {
		d.opts.Metrics.WebhookDelivery(status)
	}
}
