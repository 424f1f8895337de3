// Package hook is `airlock hook AGENT` (and cmd/airlock-hook, the same
// code without cgo for developers' laptops): a coding agent's pre-tool
// hook that asks Airlock's approval API about each call and answers the
// agent in its own hook format. It fails closed: Airlock unreachable, a
// bad token, a bad answer, a denial, an expiry or the deadline passing
// all deny, with the reason, and nothing runs; an allowed approval is
// consumed first and allowed only if the consume succeeded. Of Airlock
// it imports only the API's wire format (package gateway), nothing of the
// server.
package hook

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"
)

// DefaultDeadline is how long the hook waits for a person before it
// denies: under Claude Code's and Codex's 10-minute hook timeout, at which
// they would let the call run. (Cursor and Gemini CLI: ShortDeadline.)
const DefaultDeadline = 9 * time.Minute

// maxInput bounds the hook input read from stdin.
const maxInput = 4 << 20

// Usage is the hook's synopsis.
const Usage = "AGENT [-url URL] [-token TOKEN] [-deadline 9m]"

// Agents lists the agent names `airlock hook` takes.
func Agents() []string {
	names := make([]string, 0, len(agents))
	for n := range agents {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Main runs the hook for args (the agent's name, then flags): the
// agent's hook JSON on stdin, its answer on stdout, the exit code
// returned. Configuration: -url or AIRLOCK_URL (Airlock's base URL),
// -token or AIRLOCK_TOKEN (the client's token), -deadline.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return run(ctx, args, stdin, stdout, stderr, os.Getenv, time.Now)
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, env func(string) string, now func() time.Time) int {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fmt.Fprintf(stderr, "airlock hook: name the agent: %s\n", strings.Join(Agents(), ", "))
		return 2
	}
	ag, ok := agents[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "airlock hook: unknown agent %q; one of %s\n", args[0], strings.Join(Agents(), ", "))
		return 2
	}
	fs := flag.NewFlagSet("airlock hook "+ag.name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	base := fs.String("url", env("AIRLOCK_URL"), "Airlock's base URL (default $AIRLOCK_URL)")
	token := fs.String("token", "", "the client's token (default $AIRLOCK_TOKEN)")
	deadline := fs.Duration("deadline", ag.deadline, "how long to wait for a person before denying (keep it under the agent's hook timeout)")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if *token == "" {
		*token = env("AIRLOCK_TOKEN")
	}
	in, err := io.ReadAll(io.LimitReader(stdin, maxInput+1))
	if err == nil && len(in) > maxInput {
		err = errors.New("the hook's input is over 4 MiB")
	}
	var c call
	if err == nil {
		c, err = ag.parse(in)
	}
	if err != nil {
		// Nothing to ask about: the call is denied all the same (a
		// hook that cannot read its input must not let a call through).
		return respond(ag, c, Decision{Reason: fmt.Sprintf("Airlock's hook could not read this call (%s), so it is denied. Nothing ran.", oneLine(err.Error(), 300))}, stdout, stderr)
	}
	var d Decision
	switch {
	case *base == "":
		d = Decision{Reason: "Airlock's hook has no URL (set AIRLOCK_URL or -url), so this call is denied. Nothing ran."}
	case *token == "":
		d = Decision{Reason: "Airlock's hook has no token (set AIRLOCK_TOKEN or -token), so this call is denied. Nothing ran."}
	default:
		client := &Client{URL: *base, Token: *token, HTTP: &http.Client{Timeout: poll + 35*time.Second}}
		d = decide(ctx, client, Request{Tool: c.Tool, Args: c.Args, Session: c.Session, CallID: c.CallID}, now().Add(*deadline), now)
	}
	return respond(ag, c, d, stdout, stderr)
}

func respond(ag agent, c call, d Decision, stdout, stderr io.Writer) int {
	a := ag.answer(c, d)
	if a.Stderr != "" {
		fmt.Fprintln(stderr, a.Stderr)
	}
	if _, err := stdout.Write(append(a.Stdout, '\n')); err != nil {
		return 2 // the answer did not reach the agent: block
	}
	return a.Exit
}
