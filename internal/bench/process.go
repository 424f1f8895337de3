package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
)

// process is the bench's Airlock: a bench-server process (this
// executable, started anew) and its listeners. Its figures are asked for
// over its stdin and stdout, which no one else can reach.
type process struct {
	hello  serverHello
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.Reader
	enc    *json.Encoder
	dec    *json.Decoder
	once   sync.Once
	err    error
}

// startProcess starts the bench's Airlock process and waits for its
// listeners. Its warnings go to stderr.
func startProcess(ctx context.Context, o options, dsn, slackURL string, stderr io.Writer) (*process, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("start airlock: %w", err)
	}
	cmd := exec.CommandContext(ctx, exe, ServerCommand, "-driver", o.driver, "-dsn", dsn, "-slack", slackURL, "-workers", strconv.Itoa(o.workers))
	cmd.Env = append(os.Environ(), ServerEnv+"=1")
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start airlock: %w", err)
	}
	a := &process{cmd: cmd, stdin: stdin, stdout: stdout, enc: json.NewEncoder(stdin), dec: json.NewDecoder(stdout)}
	if err := a.dec.Decode(&a.hello); err != nil {
		return nil, fmt.Errorf("start airlock: no listeners announced: %w (exit: %v)", err, a.stop())
	}
	return a, nil
}

// stop closes the process's stdin, which stops it, and waits for it.
func (a *process) stop() error {
	a.once.Do(func() {
		a.stdin.Close()
		_, _ = io.Copy(io.Discard, a.stdout)
		if err := a.cmd.Wait(); err != nil {
			a.err = fmt.Errorf("airlock %s: %w", ServerCommand, err)
		}
	})
	return a.err
}

// do sends one request and reads its reply.
func (a *process) do(req controlRequest) (controlReply, error) {
	var reply controlReply
	if err := a.enc.Encode(req); err != nil {
		return reply, fmt.Errorf("airlock %s: %w", req.Op, err)
	}
	if err := a.dec.Decode(&reply); err != nil {
		return reply, fmt.Errorf("airlock %s: %w", req.Op, err)
	}
	if reply.Error != "" {
		return reply, fmt.Errorf("airlock %s: %s", req.Op, reply.Error)
	}
	return reply, nil
}

// cpu is the process's CPU time and peak memory so far.
func (a *process) cpu() (figures, error) {
	return a.sample(controlRequest{Op: "cpu"})
}

// memory is the process's figures with its resident memory after a GC;
// wait: once its work so far is done; settle: after it returned its free
// memory to the system.
func (a *process) memory(wait, settle bool) (figures, error) {
	return a.sample(controlRequest{Op: "memory", Wait: wait, Settle: settle})
}

// memories is the process's memory figures (wait: once its work so far
// is done), then again once it returned its free memory to the system.
func (a *process) memories(wait bool) (now, settled figures, err error) {
	if now, err = a.memory(wait, false); err != nil {
		return figures{}, figures{}, err
	}
	settled, err = a.memory(false, true)
	return now, settled, err
}

func (a *process) sample(req controlRequest) (figures, error) {
	reply, err := a.do(req)
	if err != nil || reply.Sample == nil {
		return figures{}, cmp.Or(err, fmt.Errorf("airlock %s: no figures", req.Op))
	}
	return *reply.Sample, nil
}

// profile asks for a profile op (heap, cpu-start, cpu-stop) into file,
// a path as the bench sees it (the process shares its working directory).
func (a *process) profile(op, file string) error {
	_, err := a.do(controlRequest{Op: op, File: file})
	return err
}
