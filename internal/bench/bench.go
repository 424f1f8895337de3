// Package bench is Airlock's lab: airlock-lab bench, which measures the
// decision path end to end against fakes (Airlock in a bench-server
// process of its own), and airlock-lab soak, which repeats the
// double-click storm. It is no part of the product: cmd/airlock-lab
// wires its commands in.
package bench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/airlockhq/airlock/storage"
)

// HTTP is how airlock run serves HTTP; the bench's Airlock and its fake
// Slack are served the same way.
type HTTP struct {
	// Server is the server airlock run serves h with (its limits).
	Server func(h http.Handler) *http.Server
	// Handler is airlock run's handler around the platforms' routes
	// (with its health and readiness endpoints).
	Handler func(db Pinger, routes map[string]http.Handler) http.Handler
}

// Pinger is what readiness needs of storage (*storage.DB has it).
type Pinger interface {
	Ping(ctx context.Context) error
}

// Bench is airlock-lab bench. It measures the decision path end to end
// against fakes on 127.0.0.1: a fake Slack Web API, an instant model and
// an instant tool, with the real Slack adapter in HTTP mode behind the
// real HTTP server on a real listener, and real storage (SQLite in a
// temporary file, or PostgreSQL in a fresh schema). Airlock runs in a
// process of its own (this executable as bench-server), so that its
// memory and CPU are measured without the fake Slack's and the clients'.
// The bench creates -cards cards (one mention each, -clickers at a time),
// then -clickers concurrent clickers POST one signed Allow click per
// card. It reports the clicks' ack latency as the client sees it,
// decisions finished per second (until every batch is done and the
// model's answer posted), and Airlock's memory per pending card; and, in
// the same run, the baselines they are judged against: a bare net/http
// handler in Airlock's process answering the same requests from the same
// client, and raw commits per second of the database with the same
// settings. Every decision must run its tool exactly once.
func Bench(ctx context.Context, args []string, stdout, stderr io.Writer, h HTTP) int {
	o, code := parseOptions(args, stderr)
	if code != 0 {
		return code
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	rep, err := runBench(ctx, o, stderr, h)
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

// maxProbe bounds -probe: more would be a load of its own.
const maxProbe = 5000

// maxCards keeps each card's thread ts within Slack's 6 digits.
const maxCards = 999_999

type options struct {
	cards, clickers        int
	driver, dsn            string
	json                   bool
	cpuprofile, memprofile string
	timeout                time.Duration
	workers                int
	probe                  int
}

// parseOptions reads airlock bench's flags; a code other than 0 is the
// exit code of a misuse, already explained on stderr.
func parseOptions(args []string, stderr io.Writer) (options, int) {
	fs := flag.NewFlagSet("airlock bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := options{}
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
		return o, 2
	}
	if err := o.check(); err != nil {
		fmt.Fprintf(stderr, "airlock bench: %v\n", err)
		return o, 2
	}
	return o, 0
}

// check says what is wrong with the options, naming the flag.
func (o options) check() error {
	if o.probe < 0 || o.probe > maxProbe {
		return fmt.Errorf("-probe must be 0 to %d", maxProbe)
	}
	if o.cards < 1 || o.clickers < 1 || o.cards > maxCards {
		return fmt.Errorf("-cards must be 1 to %d and -clickers positive", maxCards)
	}
	switch o.driver {
	case storage.DriverSQLite:
		if err := checkNewFile(o.dsn); err != nil {
			return fmt.Errorf("-dsn: %w", err)
		}
	case storage.DriverPostgres:
		if o.dsn == "" {
			return errors.New("-dsn is required for postgres")
		}
	default:
		return fmt.Errorf("-driver %q is not one of sqlite, postgres", o.driver)
	}
	return nil
}

// checkNewFile refuses a SQLite DSN naming a file that holds anything:
// the bench's Airlock would recover and change what is in it (a
// database of airlock run's, given by mistake).
func checkNewFile(dsn string) error {
	if dsn == "" {
		return nil
	}
	path, _, _ := strings.Cut(strings.TrimPrefix(dsn, "file:"), "?")
	if fi, err := os.Stat(path); err == nil && fi.Size() > 0 {
		return fmt.Errorf("%s is not empty; the bench needs a new file", path)
	}
	return nil
}
