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
	p.send("what is the status of api?")
	p.waitFor("No model is configured")
	if n := strings.Count(p.errb.String(), "model: off"); n != 1 {
		t.Fatalf("the model-off line %d times; stderr:\n%s", n, p.errb.String())
	}
	p.send("/quit")
	_ = cmd.Wait()
	if strings.Contains(p.errb.String(), "GEMINI_API_KEY") {
		t.Fatalf("stderr: %s", p.errb.String())
	}
}
