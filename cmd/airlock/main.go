// Command airlock is the binary: it loads the configuration, wires storage,
// the model provider, the tools, the bot, its jobs and the configured chat
// platforms together, and serves the HTTP endpoints. Its commands are
// dispatched from one table. The bench and the soaks are not among them:
// they are the lab's (cmd/airlock-lab), and the binary holds none of the
// lab's fakes.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/airlockhq/airlock/hook"
)

// runFunc runs a command on its arguments (its name left out) and returns
// the exit code: 0 done, 1 failed, 2 misused.
type runFunc func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int

// command is one of airlock's commands, dispatched by its name and listed
// in the usage.
type command struct {
	name string
	args string // its flags and arguments, as the usage shows them
	help string // what it does, in a line
	run  runFunc
	sub  []command // its subcommands, in the usage only: run dispatches them
}

// commands are airlock's commands, in the usage's order.
var commands = []command{
	{name: "run", args: "-config FILE", help: "run the configured platforms and the HTTP endpoints", run: withConfig("run", serveCmd)},
	{name: "chat", args: "-config FILE", help: "talk to the agent in this terminal (shell adapter)", run: withConfig("chat", chatCmd)},
	{name: "check-config", args: "-config FILE", help: "validate the config; exits non-zero naming the bad key", run: withConfig("check-config", checkConfig)},
	{name: "migrate", args: "-config FILE", help: "apply the database migrations", run: withConfig("migrate", migrateCmd)},
	{name: "discord-invite", args: "-config FILE", help: "print the Discord install URL with the permissions the bot needs", run: withConfig("discord-invite", discordInvite)},
	{name: "audit", args: "-config FILE [-conversation ID] [-since 7d|TIME] [-json]",
		help: "who asked, the exact arguments, who decided, when, and the outcome of every call", run: noStdin(audit),
		sub: []command{
			{name: "audit verify", args: "-config FILE | -file EXPORT.jsonl [-checkpoint FILE] [-pubkey FILE] [-allow-unchecked-checkpoints]", help: "check the audit's hash chain, read-only (and that it still holds a checkpoint's row; with -pubkey or the config's audit.signing_key, every stored checkpoint); exit 1 naming the first row edited, deleted, inserted or reordered, 3 when stored checkpoints went unchecked"},
			{name: "audit export", args: "-config FILE -format jsonl|csv [-since T] [-until T] [-conversation ID] [-tool NAME] [-actor ID]", help: "stream audit rows in id order with their hashes"},
			{name: "audit stats", args: "-config FILE [-since 7d] [-json]", help: "decision figures per tool and approver, and the tools that look rubber-stamped"},
		}},
	{name: "events", args: "-config FILE [-dead]", help: "webhook deliveries not yet accepted, or the dead ones", run: noStdin(eventsCmd),
		sub: []command{{name: "events retry", args: "ID -config FILE", help: "send a dead delivery again"}}},
	{name: "tools", args: "-config FILE", help: "every tool the model is offered, its source, and whether and why it needs approval", run: noStdin(listTools)},
	{name: "runbooks", args: "-config FILE", help: "every runbook, its parameters and steps, and whether and why each step needs approval", run: noStdin(listRunbooks)},
	{name: "grants", args: "-config FILE [-active]", help: `list grants ("Allow for" approvals of a tool in a thread)`, run: noStdin(grants),
		sub: []command{{name: "grants revoke", args: "-config FILE ID", help: "revoke a grant"}}},
	{name: "hook", args: hook.Usage, help: "a coding agent's pre-tool hook: asks Airlock's approval API about the call on stdin, answers in the agent's format; denies on any failure", run: hook.Main},
	{name: "health", args: "[-url URL]", help: "GET URL (default http://127.0.0.1:8080/readyz); exit 0 on 2xx, else 1 with the reason", run: noStdin(health)},
}

var usage = usageText(commands)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the whole program; main only wires the process to it.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, usage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands {
		if c.name == args[0] && c.run != nil {
			return c.run(ctx, args[1:], stdin, stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "airlock: unknown command %q\n\n%s", args[0], usage)
	return 2
}

// usageText lists the commands, each with its help
// beside it, or below it where the two do not fit on a line.
func usageText(cmds []command) string {
	const width = 28 // of the name and the arguments, before the help
	var b strings.Builder
	b.WriteString("airlock: an approval gate between an LLM agent and its tools.\n\nUsage:\n")
	line := func(c command) {
		synopsis := fmt.Sprintf("%-12s %s", c.name, c.args)
		if len(synopsis) < width {
			fmt.Fprintf(&b, "  airlock %-*s%s\n", width, synopsis, c.help)
			return
		}
		fmt.Fprintf(&b, "  airlock %s\n  %*s%s\n", synopsis, len("airlock ")+width, "", c.help)
	}
	for _, c := range cmds {
		line(c)
		for _, s := range c.sub {
			line(s)
		}
	}
	return b.String()
}

// noStdin adapts a command that reads no input.
func noStdin(f func(ctx context.Context, args []string, stdout, stderr io.Writer) int) runFunc {
	return func(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
		return f(ctx, args, stdout, stderr)
	}
}
