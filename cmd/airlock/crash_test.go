package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/model/modeltest"
)

// crashRig is one conversation's world: a fake model, a fake tool service,
// a config on a real SQLite file, and the crashtest build of the binary.
type crashRig struct {
	t       *testing.T
	tools   *toolServer
	cfgPath string
	bin     string

	mu          sync.Mutex
	holdAnswer  chan struct{} // when set, the model's answer to tool results waits on it
	answerAsked chan struct{} // closed when the model was asked to answer tool results
}

func newCrashRig(t *testing.T) *crashRig {
	r := &crashRig{t: t, tools: newToolServer(t), bin: airlockBinary(t, "crashtest")}
	model := modeltest.NewOpenAIServer(t, func(req modeltest.OpenAIRequest) modeltest.OpenAIReply {
		if last := req.Messages[len(req.Messages)-1]; last.Role == "tool" {
			r.mu.Lock()
			hold, asked := r.holdAnswer, r.answerAsked
			r.mu.Unlock()
			if hold != nil {
				close(asked)
				<-hold
			}
		}
		return agent(req)
	})
	dir := t.TempDir()
	r.cfgPath = filepath.Join(dir, "airlock.yaml")
	cfg := fmt.Sprintf(e2eConfig, filepath.Join(dir, "airlock.db"), model.BaseURL(), r.tools.URL, r.tools.URL)
	if err := os.WriteFile(r.cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return r
}

// count returns how many times the fake service saw path.
func (r *crashRig) count(path string) int {
	return r.tools.count(path)
}

// waitUntil polls cond for up to 20 s: the binary under test is slower
// to answer than a package's own server.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testkit.Eventually(t, 20*time.Second, what, cond)
}

// pauseDeploy starts the binary, asks for the deploy and waits for the card.
func (r *crashRig) pauseDeploy(env ...string) *chatProcess {
	p := startChatWith(r.t, r.bin, r.cfgPath, env...)
	p.send("please deploy api")
	p.waitFor("/allow N")
	p.waitFor("\n> ")
	if n := len(r.tools.calls()); n != 0 {
		r.t.Fatalf("tools ran before the decision: %d", n)
	}
	return p
}

// exited waits for a process that kills itself.
func exited(t *testing.T, p *chatProcess) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("the process did not die at the crash point\nstdout:\n%s\nstderr:\n%s", p.out.String(), p.errb.String())
	}
}

// killedBeforeAnyRun pauses the deploy, allows it with the binary set to
// die at point, checks nothing ran, restarts it on the same database and
// returns the rig and what the model saw next.
func killedBeforeAnyRun(t *testing.T, point string) (*crashRig, string) {
	t.Helper()
	r := newCrashRig(t)
	p := r.pauseDeploy("AIRLOCK_CRASH_AT=" + point)
	p.send("/allow 2")
	exited(t, p)
	if n := len(r.tools.calls()); n != 0 {
		t.Fatalf("tools ran before the crash: %d", n)
	}
	p = startChatWith(t, r.bin, r.cfgPath)
	return r, p.waitFor("model saw:") + p.waitFor("\n")
}

// TestCrashRecovery kills the real binary with SIGKILL at several points
// of the confirmation path, restarts it on the same database, and checks
// that no tool ran twice, no allowed call was lost, and the conversation
// ends with an answer or an explicit unknown.
func TestCrashRecovery(t *testing.T) {
	skipShort(t)
	// Killed after the deciding click's write, or after a runner claimed
	// the batch, and before any run started: every call runs once after
	// the restart.
	for _, point := range []string{"decided", "claimed"} {
		t.Run("after the deciding click, before the first run ("+point+")", func(t *testing.T) {
			r, answer := killedBeforeAnyRun(t, point)
			time.Sleep(200 * time.Millisecond) // a wrongful second run would arrive now
			if r.count("/status/api") != 1 || r.count("/deploy/api") != 1 {
				t.Fatalf("after restart: %+v", r.tools.calls())
			}
			if !strings.Contains(answer, "/deploy/api") {
				t.Fatalf("answer: %q", answer)
			}
		})
	}

	t.Run("during a slow tool run", func(t *testing.T) {
		r := newCrashRig(t)
		release := make(chan struct{})
		r.tools.mu.Lock()
		r.tools.block = release
		r.tools.mu.Unlock()
		defer close(release)
		p := r.pauseDeploy()
		p.send("/allow 2")
		waitUntil(t, "the deploy request reached the service", func() bool { return r.count("/deploy/api") == 1 })
		p.kill()
		p = startChatWith(t, r.bin, r.cfgPath)
		out := p.waitFor("model saw:") + p.waitFor("\n")
		if !strings.Contains(strings.ToLower(out), "outcome unknown") && !strings.Contains(out, "is unknown") {
			t.Fatalf("the thread was not told the outcome is unknown:\n%s", out)
		}
		if !strings.Contains(out, "outcome of this tool call is unknown") {
			t.Fatalf("the model was not told the outcome is unknown:\n%s", out)
		}
		t.Logf("after restart:\n%s", out)
		time.Sleep(200 * time.Millisecond) // a wrongful re-run would arrive now
		if r.count("/deploy/api") != 1 || r.count("/status/api") != 1 {
			t.Fatalf("a call ran again after the crash: %+v", r.tools.calls())
		}
	})

	// Each run's outcome is stored when it ends: killed after the runs and
	// before the batch's results were stored, the stored results reach
	// the model and nothing runs again.
	t.Run("after the runs, before their results were stored", func(t *testing.T) {
		r := newCrashRig(t)
		p := r.pauseDeploy("AIRLOCK_CRASH_AT=ran")
		p.send("/allow 2")
		exited(t, p)
		if r.count("/status/api") != 1 || r.count("/deploy/api") != 1 {
			t.Fatalf("before restart: %+v", r.tools.calls())
		}
		p = startChatWith(t, r.bin, r.cfgPath)
		answer := p.waitFor("model saw:") + p.waitFor("\n")
		time.Sleep(200 * time.Millisecond) // a wrongful re-run would arrive now
		if r.count("/status/api") != 1 || r.count("/deploy/api") != 1 {
			t.Fatalf("a call ran again: %+v", r.tools.calls())
		}
		if !strings.Contains(answer, `"path":"/status/api"`) || !strings.Contains(answer, `"path":"/deploy/api"`) {
			t.Fatalf("the stored results did not reach the model: %q", answer)
		}
	})

	t.Run("after the results, before the answer", func(t *testing.T) {
		r := newCrashRig(t)
		hold, asked := make(chan struct{}), make(chan struct{})
		r.mu.Lock()
		r.holdAnswer, r.answerAsked = hold, asked
		r.mu.Unlock()
		p := r.pauseDeploy()
		p.send("/allow 2")
		select {
		case <-asked:
		case <-time.After(20 * time.Second):
			t.Fatal("the model was never asked to answer")
		}
		p.kill()
		r.mu.Lock()
		r.holdAnswer = nil
		r.mu.Unlock()
		close(hold)
		p = startChatWith(t, r.bin, r.cfgPath)
		answer := p.waitFor("model saw:") + p.waitFor("\n")
		if r.count("/status/api") != 1 || r.count("/deploy/api") != 1 {
			t.Fatalf("a call ran again: %+v", r.tools.calls())
		}
		if !strings.Contains(answer, "/deploy/api") {
			t.Fatalf("answer: %q", answer)
		}
	})
}
