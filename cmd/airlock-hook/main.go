// Command airlock-hook is `airlock hook` alone: a coding agent's
// pre-tool hook that asks Airlock's approval API about each call (see
// package hook). It is built without cgo, so `go install` needs no C
// compiler on a developer's laptop (Linux, macOS, Windows).
//
//	airlock-hook claude-code   (AIRLOCK_URL, AIRLOCK_TOKEN; -deadline 9m)
package main

import (
	"context"
	"os"
	"os/signal"

	"github.com/airlockhq/airlock/hook"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := hook.Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
