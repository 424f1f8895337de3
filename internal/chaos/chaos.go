// Package chaos is airlock-lab soak -chaos: many conversations against the
// real `airlock run` over Slack HTTP, with faults injected on a schedule
// drawn from a seed (a fake Slack answering 429 and 5xx for stretches, a
// slow tool, Airlock SIGKILLed and restarted, PostgreSQL taken away), and
// then the checks that nothing ran twice, nothing is stuck, every card
// converged, no acknowledged click or mention and no stored answer of
// the model was lost, and the soak saw enough happen to mean something.
// It is no part of the product: cmd/airlock-lab runs it, and it runs the
// airlock binary.
package chaos

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// Limits of the flags.
const (
	MaxDuration      = 30 * time.Minute
	MaxConversations = 2000
)

// Options are one soak's settings.
type Options struct {
	Exe           string        // the airlock executable to run; "": built from this checkout
	Driver, DSN   string        // the database; "" DSN: a new SQLite file
	Conversations int           // concurrent conversations
	Duration      time.Duration // how long conversations start
	Seed          uint64        // the fault schedule and the choices
	KillEvery     time.Duration // SIGKILL Airlock about this often; 0: never
	PGRestart     string        // a shell command restarting PostgreSQL; "": cut its connections instead
	Timeout       time.Duration // confirmation.timeout of the soak's Airlock
	Settle        time.Duration // how long the end waits for batches and cards to finish
	Log           io.Writer     // Airlock's logs; nil: discarded
	// The soak fails unless it saw at least this many cards, clicks
	// sent, people's decisions stored (allowed or denied) and, with
	// KillEvery, kills: a process that answers 200 and does nothing
	// must not pass.
	MinCards, MinClicks, MinDecisions, MinKills int

	// cardWait is how long a conversation waits for its card (40 s);
	// quiet how long the end waits for Slack to be quiet (10 s). Tests
	// shorten them.
	cardWait, quiet time.Duration
}

// Run is airlock-lab soak -chaos. It exits 0 when every check passed, 1
// on a violation (printing the seed to replay it), 2 on bad flags.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("airlock soak -chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o Options
	fs.StringVar(&o.Exe, "airlock", "", "the airlock executable to soak (default: built from this checkout with go build)")
	fs.StringVar(&o.Driver, "driver", "sqlite", "sqlite or postgres")
	fs.StringVar(&o.DSN, "dsn", "", "database (default: a new SQLite file in a temporary folder)")
	fs.IntVar(&o.Conversations, "conversations", 200, "concurrent conversations")
	fs.DurationVar(&o.Duration, "duration", 5*time.Minute, "how long new conversations start (at most 30m)")
	seed := fs.Uint64("seed", 0, "the seed of the fault schedule and the choices (0: from the clock)")
	fs.DurationVar(&o.KillEvery, "kill-every", 30*time.Second, "SIGKILL and restart Airlock about this often (0: never)")
	fs.StringVar(&o.PGRestart, "pg-restart", "", "a shell command that restarts PostgreSQL (default: its connections are cut for stretches)")
	fs.DurationVar(&o.Timeout, "timeout", 45*time.Second, "confirmation.timeout of the soak's Airlock")
	fs.DurationVar(&o.Settle, "settle", 3*time.Minute, "how long the end waits for every batch and card to finish")
	fs.IntVar(&o.MinCards, "min-cards", -1, "fail unless at least this many cards were posted (default: -conversations)")
	fs.IntVar(&o.MinClicks, "min-clicks", -1, "fail unless at least this many clicks were sent (default: -conversations)")
	fs.IntVar(&o.MinDecisions, "min-decisions", -1, "fail unless at least this many people's decisions were stored (default: -conversations)")
	fs.IntVar(&o.MinKills, "min-kills", -1, "fail unless Airlock was killed at least this many times (default: 1 with -kill-every, else 0)")
	verbose := fs.Bool("v", false, "print Airlock's logs on stderr")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	for _, m := range []*int{&o.MinCards, &o.MinClicks, &o.MinDecisions} {
		if *m == -1 {
			*m = o.Conversations
		}
	}
	if o.MinKills == -1 && o.KillEvery > 0 {
		o.MinKills = 1
	} else if o.MinKills == -1 {
		o.MinKills = 0
	}
	o.Seed = *seed
	if o.Seed == 0 {
		o.Seed = uint64(time.Now().UnixNano())
	}
	if *verbose {
		o.Log = stderr
	}
	if err := o.validate(); err != nil {
		fmt.Fprintf(stderr, "airlock soak -chaos: %v\n", err)
		return 2
	}
	rep, err := Soak(ctx, o)
	if rep != nil {
		rep.print(stdout)
	}
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "airlock soak -chaos: %v (seed %d)\n", err, o.Seed)
		return 1
	case len(rep.Violations) > 0:
		fmt.Fprintf(stderr, "airlock soak -chaos: %d violations; replay with -seed %d\n", len(rep.Violations), o.Seed)
		return 1
	}
	return 0
}

func (o Options) validate() error {
	switch {
	case o.Driver != "sqlite" && o.Driver != "postgres":
		return fmt.Errorf("-driver: %q is not sqlite or postgres", o.Driver)
	case o.Driver == "postgres" && o.DSN == "":
		return errors.New("-dsn is required for postgres")
	case o.PGRestart != "" && o.Driver != "postgres":
		return errors.New("-pg-restart needs -driver postgres")
	case o.Conversations < 1 || o.Conversations > MaxConversations:
		return fmt.Errorf("-conversations must be between 1 and %d", MaxConversations)
	case o.Duration < time.Second || o.Duration > MaxDuration:
		return fmt.Errorf("-duration must be between 1s and %s", MaxDuration)
	case o.KillEvery < 0 || (o.KillEvery > 0 && o.KillEvery < 2*time.Second):
		return errors.New("-kill-every must be 0 or at least 2s")
	case o.Timeout < 5*time.Second:
		return errors.New("-timeout must be at least 5s")
	case o.Settle < o.Timeout:
		return errors.New("-settle must be at least -timeout")
	case o.MinCards < 0:
		return errors.New("-min-cards must not be negative")
	case o.MinClicks < 0:
		return errors.New("-min-clicks must not be negative")
	case o.MinDecisions < 0:
		return errors.New("-min-decisions must not be negative")
	case o.MinKills < 0:
		return errors.New("-min-kills must not be negative")
	case o.MinKills > 0 && o.KillEvery == 0:
		return errors.New("-min-kills needs -kill-every")
	}
	return nil
}

// Soak runs one soak and checks it. The error is the soak's own failure
// (a fake that could not start, Airlock that never came up); violations of
// the guarantees are in the report.
func Soak(ctx context.Context, o Options) (*Report, error) {
	dir, err := os.MkdirTemp("", "airlock-chaos")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if o.DSN == "" {
		o.DSN = filepath.Join(dir, "chaos.db")
	}
	if o.Exe == "" {
		if o.Exe, err = buildAirlock(ctx, dir); err != nil {
			return nil, err
		}
	}
	if o.cardWait <= 0 {
		o.cardWait = 40 * time.Second
	}
	if o.quiet <= 0 {
		o.quiet = 10 * time.Second
	}
	w, err := newWorld(ctx, o, dir)
	if err != nil {
		return nil, err
	}
	defer w.close()
	rng := rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15))
	if err := w.airlock.start(ctx); err != nil {
		return nil, err
	}
	start := time.Now()
	*w.faults = *newSchedule(rng, start, o.Duration, o.KillEvery, o.Driver == "postgres")
	w.drive(ctx, rng)
	w.report.Elapsed = time.Since(start)
	return w.finish(ctx)
}

// airlockPackage is the product's command, which the soak runs.
const airlockPackage = "github.com/airlockhq/airlock/cmd/airlock"

// buildAirlock builds the airlock binary from the checkout the soak is
// run in (the go command finds the module from the working directory)
// into dir, and returns its path.
func buildAirlock(ctx context.Context, dir string) (string, error) {
	exe := filepath.Join(dir, "airlock")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", exe, airlockPackage)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s (run the soak in a checkout, or name a binary with -airlock): %w\n%s", airlockPackage, err, bytes.TrimSpace(out))
	}
	return exe, nil
}
