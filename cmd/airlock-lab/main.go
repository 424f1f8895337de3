// Command airlock-lab is Airlock's lab, apart from the product binary:
// bench (the decision path measured end to end against fakes, Airlock in
// a bench-server process of its own), soak (the double-click storm) and
// soak -chaos (conversations against the real airlock binary under
// injected faults). It holds the fakes the product must not: the bench's
// and the soak's Slack, model and tools, and the TCP proxy.
package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/airlockhq/airlock/cmd/internal/httpserver"
	"github.com/airlockhq/airlock/internal/bench"
	"github.com/airlockhq/airlock/internal/chaos"
)

const usage = `airlock-lab: Airlock's lab, the bench and the soaks against fakes.

Usage:
  airlock-lab soak  [-storms N] [-clicks N] [-driver sqlite|postgres -dsn DSN]
                    repeat a storm of concurrent clicks on one button (every storm must run the tool once)
  airlock-lab soak  -chaos [-conversations N] [-duration D] [-seed N] [-kill-every D] [-driver sqlite|postgres -dsn DSN [-pg-restart CMD]] [-airlock FILE]
                    conversations against the airlock binary (built from this checkout unless -airlock) under injected faults, then the checks
  airlock-lab bench [-cards N] [-clickers N] [-driver sqlite|postgres -dsn DSN] [-json] [-cpuprofile F] [-memprofile F] [-workers N] [-probe N]
                    measure click acks, decisions/s and memory per card against fakes, with baselines
  airlock-lab bench-gateway [-rate N] [-duration D] [-sessions N] [-json] [-check]
                    the approval API's added latency for calls no rule asks about, against a bare handler (SQLite)
  airlock-lab bench-mcp [-rate N] [-duration D] [-json] [-check]
                    an ungated tools/call through Airlock's MCP server to an upstream MCP server, against calling it directly

Each command's -h lists all its flags.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// benchHTTP serves the bench's Airlock as airlock run serves.
var benchHTTP = bench.HTTP{
	Server: func(h http.Handler) *http.Server { return httpserver.New(h, httpserver.DefaultLimits) },
	Handler: func(db bench.Pinger, routes map[string]http.Handler) http.Handler {
		return httpserver.Handler(db, routes)
	},
}

// run is the whole program; main only wires the process to it. It
// returns the exit code: 0 done, 1 failed, 2 misused.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "-h", "--help", "help":
		fmt.Fprint(stderr, usage)
		return 0
	case "bench":
		return bench.Bench(ctx, args[1:], stdout, stderr, benchHTTP)
	case bench.GatewayCommand:
		return bench.Gateway(ctx, args[1:], stdout, stderr, benchHTTP)
	case bench.MCPCommand:
		return bench.MCP(ctx, args[1:], stdout, stderr, benchHTTP)
	case "soak":
		if len(args) > 1 && (args[1] == "-chaos" || args[1] == "--chaos") {
			return chaos.Run(ctx, args[2:], stdout, stderr)
		}
		return bench.Soak(ctx, args[1:], stdout, stderr)
	case bench.ServerCommand:
		// Started by bench, as its Airlock: the product's packages wired
		// with the bench's fakes, in a process of its own.
		return bench.Server(ctx, args[1:], stdin, stdout, stderr, benchHTTP)
	}
	fmt.Fprintf(stderr, "airlock-lab: unknown command %q\n\n%s", args[0], usage)
	return 2
}
