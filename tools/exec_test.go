//go:build unix

package tools

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

var shellSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"x":    map[string]any{"type": "string"},
		"y":    map[string]any{"type": "string"},
		"n":    map[string]any{"type": "integer"},
		"opts": map[string]any{"type": "object"},
	},
}

func execTool(t *testing.T, cfg ExecConfig, opts Options) Tool {
	t.Helper()
	s := mustNew(t, []Config{{Name: "cmd", Parameters: shellSchema, Exec: &cfg}}, opts)
	return mustGet(t, s, "cmd")
}

// printArgs prints each of its arguments followed by "|".
var printArgs = []string{"sh", "-c", `printf '%s|' "$@"`, "sh"}

func TestExecArgvNoShell(t *testing.T) {
	tool := execTool(t, ExecConfig{Command: append(printArgs, "{{.x}}", "--count={{.n}}", "{{.y}}", "{{json .opts}}")}, Options{})
	args := `{"x":"; rm -rf / #","y":"$(whoami) ` + "`id`" + ` --rm -rf","n":10000000000,"opts":{"a":"b c"}}`
	out, err := tool.Run(context.Background(), json.RawMessage(args), "k")
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	want := "; rm -rf / #|--count=10000000000|$(whoami) `id` --rm -rf|" + `{"a":"b c"}|`
	if out != want {
		t.Errorf("argv\n got %q\nwant %q", out, want)
	}
}

func TestExecEnvironment(t *testing.T) {
	t.Setenv("AIRLOCK_TEST_SECRET", "hunter2")
	tool := execTool(t, ExecConfig{Command: []string{"env"}, Env: map[string]string{"DEPLOY_TOKEN": "tok", "REGION": "eu"}}, Options{})
	args := `{"x": "v"}`
	out, err := tool.Run(context.Background(), json.RawMessage(args), "batch-1/#0")
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	env := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		k, v, _ := strings.Cut(line, "=")
		env[k] = v
	}
	for k, want := range map[string]string{
		"AIRLOCK_IDEMPOTENCY_KEY": "batch-1/#0",
		"AIRLOCK_TOOL_ARGS":       args,
		"DEPLOY_TOKEN":            "tok",
		"REGION":                  "eu",
		"PATH":                    os.Getenv("PATH"),
	} {
		if env[k] != want {
			t.Errorf("%s=%q, want %q", k, env[k], want)
		}
	}
	if strings.Contains(out, "hunter2") || env["AIRLOCK_TEST_SECRET"] != "" {
		t.Error("parent environment leaked to the child")
	}
	allowed := map[string]bool{"PATH": true, "HOME": true, "AIRLOCK_IDEMPOTENCY_KEY": true, "AIRLOCK_TOOL_ARGS": true, "DEPLOY_TOKEN": true, "REGION": true, "PWD": true, "SHLVL": true, "_": true}
	for k := range env {
		if !allowed[k] {
			t.Errorf("unexpected variable %s in the child's environment", k)
		}
	}
}

func TestExecStdin(t *testing.T) {
	tool := execTool(t, ExecConfig{Command: []string{"cat"}}, Options{})
	args := `{"x" : "exact bytes",   "n":1}`
	out, err := tool.Run(context.Background(), json.RawMessage(args), "k")
	if err != nil || out != args {
		t.Errorf("stdin: %q, %v", out, err)
	}
}

func TestExecExitStatus(t *testing.T) {
	tool := execTool(t, ExecConfig{Command: []string{"sh", "-c", "echo partial; echo 'oops: bad region' >&2; exit 3"}}, Options{})
	out, err := tool.Run(context.Background(), json.RawMessage(`{}`), "k")
	if err == nil || out != "" {
		t.Fatalf("Run = %q, %v", out, err)
	}
	if !strings.HasPrefix(err.Error(), "exit status 3: ") || !strings.Contains(err.Error(), "oops: bad region") || !strings.Contains(err.Error(), "partial") {
		t.Errorf("error %q", err)
	}

	missing := execTool(t, ExecConfig{Command: []string{"airlock-no-such-program"}}, Options{})
	if _, err := missing.Run(context.Background(), json.RawMessage(`{}`), "k"); err == nil || !strings.HasPrefix(err.Error(), "start: ") {
		t.Errorf("missing program: %v", err)
	}
	if _, err := missing.Run(canceledContext(), json.RawMessage(`{}`), "k"); !errors.Is(err, context.Canceled) || errors.Is(err, ErrOutcomeUnknown) {
		t.Errorf("canceled before start: %v; want a plain failure", err)
	}
}

func canceledContext() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

func TestExecStderrNotInResult(t *testing.T) {
	tool := execTool(t, ExecConfig{Command: []string{"sh", "-c", "echo out; echo warn >&2"}}, Options{})
	out, err := tool.Run(context.Background(), json.RawMessage(`{}`), "k")
	if err != nil || out != "out\n" {
		t.Errorf("Run = %q, %v", out, err)
	}
}

func TestExecTruncation(t *testing.T) {
	tool := execTool(t, ExecConfig{Command: []string{"printf", "%s", "{{.x}}"}}, Options{MaxOutput: 10})
	out, err := tool.Run(context.Background(), json.RawMessage(`{"x":"0123456789abcdef"}`), "k")
	if want := "0123456789\n[output truncated: kept 10 of 16 bytes]"; err != nil || out != want {
		t.Errorf("Run = %q, %v; want %q", out, err, want)
	}
}

func TestExecRefusesInvalidArgs(t *testing.T) {
	dir := t.TempDir()
	tool := execTool(t, ExecConfig{Command: []string{"touch", dir + "/ran"}}, Options{})
	if _, err := tool.Run(context.Background(), json.RawMessage(`{"n":"x"}`), "k"); !errors.Is(err, ErrInvalidArgs) {
		t.Errorf("Run: %v", err)
	}
	if _, err := os.Stat(dir + "/ran"); err == nil {
		t.Error("command ran with invalid arguments")
	}
}

func TestExecMissingKey(t *testing.T) {
	// A template that fails on schema-valid arguments is an invalid-arguments
	// error at validation: the call goes back to the model.
	dir := t.TempDir()
	tool := execTool(t, ExecConfig{Command: []string{"touch", dir + "/ran", "{{.y}}"}}, Options{})
	args := json.RawMessage(`{"x":"1"}`)
	if err := tool.Validate(args); !errors.Is(err, ErrInvalidArgs) || !strings.HasPrefix(err.Error(), "invalid arguments: command[2]: ") {
		t.Errorf("Validate: %v", err)
	}
	if _, err := tool.Run(context.Background(), args, "k"); !errors.Is(err, ErrInvalidArgs) {
		t.Errorf("Run: %v", err)
	}
	if _, err := os.Stat(dir + "/ran"); err == nil {
		t.Error("command ran with a key missing")
	}
}

func TestExecArgumentCannotBecomeOption(t *testing.T) {
	dir := t.TempDir()
	// touch "$1": the argument is the file name; "-{{.x}}" and
	// "--name={{.x}}" are options by the config's choice.
	tool := execTool(t, ExecConfig{Command: []string{"sh", "-c", `touch "$1"`, "sh", dir + "/{{.x}}", "{{.x}}", "--name={{.x}}", "-{{.y}}", "{{.n}}"}}, Options{})
	refused := []struct{ args, elem string }{
		{`{"x":"-rf","y":"v","n":1}`, "command[5]"},
		{`{"x":"--help","y":"v","n":1}`, "command[5]"},
		{`{"x":"ok","y":"v","n":-1}`, "command[8]"},
		{`{"x":"a\u0000b","y":"v","n":1}`, "command[4]"},
	}
	for _, tc := range refused {
		err := tool.Validate(json.RawMessage(tc.args))
		if !errors.Is(err, ErrInvalidArgs) || !strings.Contains(err.Error(), tc.elem) {
			t.Errorf("Validate(%s) = %v; want invalid arguments naming %s", tc.args, err, tc.elem)
			continue
		}
		if strings.Contains(tc.args, `-`) && !strings.Contains(err.Error(), `pass a value that does not start with "-"`) {
			t.Errorf("Validate(%s) = %q gives no advice", tc.args, err)
		}
		if _, err := tool.Run(context.Background(), json.RawMessage(tc.args), "k"); !errors.Is(err, ErrInvalidArgs) {
			t.Errorf("Run(%s) = %v; want invalid arguments", tc.args, err)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("refused calls ran: %v", entries)
	}
	// A value that starts with "-" only after other text, or in an element
	// the config made an option, is fine.
	ok := `{"x":"a-b","y":"-v","n":3}`
	if err := tool.Validate(json.RawMessage(ok)); err != nil {
		t.Fatalf("Validate(%s): %v", ok, err)
	}
	if _, err := tool.Run(context.Background(), json.RawMessage(ok), "k"); err != nil {
		t.Fatalf("Run(%s): %v", ok, err)
	}
	if _, err := os.Stat(dir + "/a-b"); err != nil {
		t.Errorf("command did not run: %v", err)
	}
}

func TestExecNonzeroExitIsAFailure(t *testing.T) {
	tool := execTool(t, ExecConfig{Command: []string{"false"}}, Options{})
	_, err := tool.Run(context.Background(), json.RawMessage(`{}`), "k")
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || errors.Is(err, ErrOutcomeUnknown) {
		t.Errorf("false: %v; want a plain exit error", err)
	}
	missing := execTool(t, ExecConfig{Command: []string{"airlock-no-such-program"}}, Options{})
	if _, err := missing.Run(context.Background(), json.RawMessage(`{}`), "k"); err == nil || errors.Is(err, ErrOutcomeUnknown) {
		t.Errorf("missing program: %v; want a plain failure", err)
	}
}

func TestExecErrorOutputHidesURLSecrets(t *testing.T) {
	tool := execTool(t, ExecConfig{Command: []string{"sh", "-c", `echo "curl: (22) https://bot:hunter22@api.example/v1?token=sk-live-123456 returned 500" >&2; exit 22`}}, Options{})
	_, err := tool.Run(context.Background(), json.RawMessage(`{}`), "k")
	if err == nil || !strings.Contains(err.Error(), "https://api.example/v1 returned 500") {
		t.Fatalf("error %v", err)
	}
	for _, secret := range []string{"hunter22", "sk-live-123456", "token="} {
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error %q contains %q", err, secret)
		}
	}
}

func TestExecTimeoutKillsProcessGroup(t *testing.T) {
	// The shell prints its background child's pid, then waits: the timeout
	// must kill both, and Run must not wait for the child's open stdout.
	tool := execTool(t, ExecConfig{Command: []string{"sh", "-c", "sleep 30 & echo child=$!; wait"}, Timeout: 200 * time.Millisecond}, Options{})
	start := time.Now()
	_, err := tool.Run(context.Background(), json.RawMessage(`{}`), "k")
	elapsed := time.Since(start)
	if !errors.Is(err, ErrOutcomeUnknown) || !strings.HasPrefix(err.Error(), "outcome unknown: timed out after 200ms") {
		t.Fatalf("error %v", err)
	}
	if elapsed > 1500*time.Millisecond {
		t.Errorf("returned after %s", elapsed)
	}
	m := regexp.MustCompile(`child=(\d+)`).FindStringSubmatch(err.Error())
	if m == nil {
		t.Fatalf("no child pid in %q", err)
	}
	pid, _ := strconv.Atoi(m[1])
	deadline := time.Now().Add(2 * time.Second)
	for !processGone(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("child %d still running", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestExecSleepTimeout(t *testing.T) {
	// Killed by its timeout, the process may have acted: unknown, not failed.
	tool := execTool(t, ExecConfig{Command: []string{"sleep", "5"}, Timeout: 200 * time.Millisecond}, Options{})
	_, err := tool.Run(context.Background(), json.RawMessage(`{}`), "k")
	if !errors.Is(err, ErrOutcomeUnknown) || err.Error() != "outcome unknown: timed out after 200ms, the process was killed" {
		t.Errorf("Run: %v", err)
	}
}

func TestExecParentCancel(t *testing.T) {
	tool := execTool(t, ExecConfig{Command: []string{"sleep", "30"}}, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	_, err := tool.Run(ctx, json.RawMessage(`{}`), "k")
	if !errors.Is(err, context.Canceled) || !errors.Is(err, ErrOutcomeUnknown) || time.Since(start) > 1500*time.Millisecond {
		t.Errorf("Run: %v after %s", err, time.Since(start))
	}
}

// processGone reports whether pid no longer runs (a zombie counts as gone).
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return os.IsNotExist(err)
	}
	// pid (comm) state ...
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}
