package tools

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"text/template"
	"text/template/parse"
	"time"

	"github.com/airlockhq/airlock/keyerr"
	"github.com/airlockhq/airlock/redact"
)

// waitDelay bounds the wait for a killed process's output pipes to close.
const waitDelay = 2 * time.Second

// execExecutor is the `exec` executor: no shell, a minimal environment, a
// timeout that kills the process group.
type execExecutor struct {
	command   []*template.Template
	option    []bool // whether command[i] starts with "-" in the config
	timeout   time.Duration
	env       map[string]string
	maxOutput int
	redact    *redact.Redactor
	okExit    []int // a preview's exit codes that are success (nil: only 0)
	// whole, for a preview, is the most output kept whole (scrubbed,
	// never cut: its hash binds a yes); more is an error. 0: a tool's
	// run, whose output is cut at maxOutput.
	whole int
}

// Validate checks the executor's keys; key is its place, e.g.
// "tools[2].exec". The argv templates are checked when New compiles them.
func (cfg *ExecConfig) Validate(key string) error {
	if len(cfg.Command) == 0 {
		return keyerr.New(key+".command", "required")
	}
	if cfg.Command[0] == "" {
		return keyerr.New(key+".command[0]", "required")
	}
	if cfg.Timeout < 0 {
		return keyerr.New(key+".timeout", "must not be negative")
	}
	for name, value := range cfg.Env {
		if name == "" || strings.ContainsAny(name, "=\x00") {
			return keyerr.New(key+".env", "invalid name %q", name)
		}
		if strings.ContainsRune(value, 0) {
			return keyerr.New(key+".env."+name, "invalid value: NUL byte")
		}
	}
	return nil
}

// newExecExecutor compiles an executor that Validate accepted.
func newExecExecutor(key string, cfg *ExecConfig, opts Options) (*execExecutor, error) {
	e := &execExecutor{timeout: cfg.Timeout, env: make(map[string]string, len(cfg.Env)), maxOutput: opts.MaxOutput, redact: opts.Redactor}
	for i, arg := range cfg.Command {
		sub := fmt.Sprintf("%s.command[%d]", key, i)
		t, err := parseTemplate(fmt.Sprintf("command[%d]", i), arg)
		if err != nil {
			return nil, keyerr.Wrap(sub, err)
		}
		if i == 0 && !literal(t.Tree.Root) {
			return nil, keyerr.New(sub, "must be literal: the program can't come from the arguments")
		}
		e.command = append(e.command, t)
		e.option = append(e.option, strings.HasPrefix(arg, "-"))
	}
	if cfg.Timeout == 0 {
		e.timeout = DefaultTimeout
	}
	for name, value := range cfg.Env {
		e.env[name] = value
	}
	return e, nil
}

// literal reports whether a template is plain text.
func literal(root *parse.ListNode) bool {
	if root == nil {
		return true
	}
	for _, n := range root.Nodes {
		if _, ok := n.(*parse.TextNode); !ok {
			return false
		}
	}
	return true
}

// maxQuoted is how many characters of a refused value an error quotes.
const maxQuoted = 40

func (e *execExecutor) check(data map[string]any) error {
	_, err := e.argv(data)
	return err
}

// argv renders the command. An element whose template does not start with
// "-" may not render to a value that does: an argument can't become an
// option of the program. Every error wraps ErrInvalidArgs.
func (e *execExecutor) argv(data map[string]any) ([]string, error) {
	argv := make([]string, len(e.command))
	for i, t := range e.command {
		var b strings.Builder
		if err := t.Execute(&b, data); err != nil {
			return nil, fmt.Errorf("%w: command[%d]: %w", ErrInvalidArgs, i, err)
		}
		v := b.String()
		switch {
		case !e.option[i] && strings.HasPrefix(v, "-"):
			return nil, fmt.Errorf(`%w: command[%d] would be %q, which starts with "-" and would be read as an option; pass a value that does not start with "-"`,
				ErrInvalidArgs, i, capRunes(v, maxQuoted))
		case strings.IndexByte(v, 0) >= 0:
			return nil, fmt.Errorf("%w: command[%d] would contain a NUL byte", ErrInvalidArgs, i)
		}
		argv[i] = v
	}
	return argv, nil
}

func (e *execExecutor) run(ctx context.Context, body []byte, data map[string]any, idempotencyKey string) (string, error) {
	argv, err := e.argv(data)
	if err != nil {
		return "", err
	}

	runCtx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	cmd := exec.CommandContext(runCtx, argv[0], argv[1:]...)
	cmd.Env = e.environ(body, idempotencyKey)
	cmd.Stdin = bytes.NewReader(body)
	// Kept past the cap by the longest secret, so one crossing the cap is
	// seen whole and scrubbed, not left in part.
	stdout := &capBuffer{max: max(e.maxOutput, e.whole) + e.redact.MaxLen()}
	combined := &capBuffer{max: e.maxOutput + e.redact.MaxLen()}
	cmd.Stdout = io.MultiWriter(stdout, combined)
	cmd.Stderr = combined
	cmd.WaitDelay = waitDelay
	setProcessGroup(cmd)

	err = cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		return e.output(stdout)
	case cmd.Process == nil: // never started: nothing ran
		if ctx.Err() != nil {
			return "", fmt.Errorf("canceled: %w", ctx.Err())
		}
		return "", fmt.Errorf("start: %w", err)
	case ctx.Err() != nil:
		return "", withOutput(fmt.Errorf("%w: canceled while running, the process was killed: %w", ErrOutcomeUnknown, ctx.Err()), combined, e.maxOutput, e.redact)
	case runCtx.Err() != nil:
		return "", withOutput(fmt.Errorf("%w: timed out after %s, the process was killed", ErrOutcomeUnknown, e.timeout), combined, e.maxOutput, e.redact)
	case errors.As(err, &exitErr) && slices.Contains(e.okExit, exitErr.ExitCode()):
		return e.output(stdout)
	case errors.As(err, &exitErr):
		return "", withOutput(err, combined, e.maxOutput, e.redact)
	default: // e.g. its output stayed open after it exited
		return "", withOutput(fmt.Errorf("%w: wait: %w", ErrOutcomeUnknown, err), combined, e.maxOutput, e.redact)
	}
}

// output is a run's output, scrubbed: cut at maxOutput with a note, or
// for a preview whole (an error when longer than whole).
func (e *execExecutor) output(stdout *capBuffer) (string, error) {
	if e.whole > 0 {
		return wholeOutput(stdout.bytes(), stdout.size(), e.whole, e.redact)
	}
	return truncateOutput(stdout.bytes(), e.maxOutput, stdout.size(), e.redact), nil
}

// environ is the child's whole environment: PATH and HOME of this process,
// the configured env, the idempotency key and the arguments.
func (e *execExecutor) environ(args []byte, idempotencyKey string) []string {
	env := make(map[string]string, len(e.env)+4)
	for _, name := range []string{"PATH", "HOME"} {
		if v, ok := os.LookupEnv(name); ok {
			env[name] = v
		}
	}
	for k, v := range e.env {
		env[k] = v
	}
	env["AIRLOCK_IDEMPOTENCY_KEY"] = idempotencyKey
	env["AIRLOCK_TOOL_ARGS"] = string(args)
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// withOutput appends the process's output, if any, to err, scrubbed by r
// and without the userinfo and query strings of URLs in it.
func withOutput(err error, out *capBuffer, max int, r *redact.Redactor) error {
	if out.size() == 0 {
		return err
	}
	return fmt.Errorf("%w: %s", err, redact.URLs(strings.TrimSpace(truncateOutput(out.bytes(), max, out.size(), r))))
}

// capBuffer keeps the first max bytes written to it and counts the rest.
type capBuffer struct {
	mu    sync.Mutex
	buf   []byte
	max   int
	total int64
}

func (b *capBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.total += int64(len(p))
	if room := b.max - len(b.buf); room > 0 {
		b.buf = append(b.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (b *capBuffer) bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf)
}

func (b *capBuffer) size() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total
}
