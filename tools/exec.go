package tools

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"text/template"
	"text/template/parse"
	"time"
)

// waitDelay bounds the wait for a killed process's output pipes to close.
const waitDelay = 2 * time.Second

// execExecutor is the `exec` executor: no shell, a minimal environment, a
// timeout that kills the process group.
type execExecutor struct {
	command   []*template.Template
	timeout   time.Duration
	env       map[string]string
	maxOutput int
}

func newExecExecutor(key string, cfg *ExecConfig, opts Options) (*execExecutor, error) {
	cerr := func(sub string, err error) error { return &ConfigError{Key: key + sub, Err: err} }
	if len(cfg.Command) == 0 {
		return nil, cerr(".command", errors.New("required"))
	}
	e := &execExecutor{timeout: cfg.Timeout, env: make(map[string]string, len(cfg.Env)), maxOutput: opts.MaxOutput}
	for i, arg := range cfg.Command {
		sub := fmt.Sprintf(".command[%d]", i)
		t, err := parseTemplate(fmt.Sprintf("command[%d]", i), arg)
		if err != nil {
			return nil, cerr(sub, err)
		}
		if i == 0 {
			if arg == "" {
				return nil, cerr(sub, errors.New("required"))
			}
			if !literal(t.Tree.Root) {
				return nil, cerr(sub, errors.New("must be literal: the program can't come from the arguments"))
			}
		}
		e.command = append(e.command, t)
	}
	switch {
	case cfg.Timeout < 0:
		return nil, cerr(".timeout", errors.New("must not be negative"))
	case cfg.Timeout == 0:
		e.timeout = DefaultTimeout
	}
	for name, value := range cfg.Env {
		if name == "" || strings.ContainsAny(name, "=\x00") {
			return nil, cerr(".env", fmt.Errorf("invalid name %q", name))
		}
		if strings.ContainsRune(value, 0) {
			return nil, cerr(".env."+name, errors.New("invalid value: NUL byte"))
		}
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

func (e *execExecutor) run(ctx context.Context, body []byte, data map[string]any, idempotencyKey string) (string, error) {
	argv := make([]string, len(e.command))
	for i, t := range e.command {
		var b strings.Builder
		if err := t.Execute(&b, data); err != nil {
			return "", fmt.Errorf("command[%d]: %w", i, err)
		}
		argv[i] = b.String()
	}

	runCtx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	cmd := exec.CommandContext(runCtx, argv[0], argv[1:]...)
	cmd.Env = e.environ(body, idempotencyKey)
	cmd.Stdin = bytes.NewReader(body)
	stdout := &capBuffer{max: e.maxOutput}
	combined := &capBuffer{max: e.maxOutput}
	cmd.Stdout = io.MultiWriter(stdout, combined)
	cmd.Stderr = combined
	cmd.WaitDelay = waitDelay
	setProcessGroup(cmd)

	err := cmd.Run()
	switch {
	case err == nil:
		return truncateOutput(stdout.bytes(), e.maxOutput, stdout.size()), nil
	case ctx.Err() != nil:
		return "", fmt.Errorf("canceled: %w", ctx.Err())
	case runCtx.Err() != nil:
		return "", withOutput(fmt.Errorf("timed out after %s", e.timeout), combined, e.maxOutput)
	}
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		return "", withOutput(err, combined, e.maxOutput)
	}
	return "", fmt.Errorf("start: %w", err)
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

// withOutput appends the process's output, if any, to err.
func withOutput(err error, out *capBuffer, max int) error {
	if out.size() == 0 {
		return err
	}
	return fmt.Errorf("%w: %s", err, strings.TrimSpace(truncateOutput(out.bytes(), max, out.size())))
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
