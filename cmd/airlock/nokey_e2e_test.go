package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The README's first command: `airlock chat -config config.example.yaml`
// in a checkout, with no model key in the environment, starts; one line
// says the model is off, and free text is answered with one line saying
// no model is configured and that runbooks work. Nothing is sent anywhere.
func TestChatStartsWithoutAModelKey(t *testing.T) {
	dir := t.TempDir() // a checkout's layout: the config and examples/
	for _, f := range []string{"config.example.yaml", "examples/service.sh"} {
		data, err := os.ReadFile(filepath.Join("..", "..", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(airlockBinary(t), "chat", "-config", "config.example.yaml")
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GEMINI_API_KEY=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	p := startChatCmd(t, cmd)
	// The greeting says the model is off, and where the log goes.
	p.waitFor("airlock: Logs go to airlock-chat.log")
	p.waitFor("airlock: No model is configured")
	p.send("what is the status of api?")
	p.waitFor("No model is configured")

	// Issue 34 item 17: free text while a run's step card waits does
	// nothing to it (no model: the text goes nowhere); /allow 1 still
	// runs the step and the run ends succeeded.
	p.send("/run restart service=api")
	p.waitFor("APPROVAL NEEDED")
	p.send("is it done yet?")
	if got := p.waitFor("No model is configured"); strings.Contains(got, "moved on") {
		t.Fatalf("free text abandoned the step's card:\n%s", got)
	}
	p.send("/allow 1")
	p.waitFor("started by local: succeeded")
	p.send("/quit")
	_ = cmd.Wait()
	if strings.Contains(p.out.String(), "moved on") {
		t.Fatalf("a card was abandoned:\n%s", p.out.String())
	}
	// Issue 34 item 21: no log line prints into the conversation; they
	// go to the log file.
	if e := p.errb.String(); e != "" {
		t.Fatalf("log lines in the terminal:\n%s", e)
	}
	logged, err := os.ReadFile(filepath.Join(dir, "airlock-chat.log"))
	if err != nil || strings.Count(string(logged), "model: off") != 1 || strings.Contains(string(logged), "GEMINI_API_KEY=") {
		t.Fatalf("log file (%v):\n%s", err, logged)
	}
}
