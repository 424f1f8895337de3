package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCheckConfig(t *testing.T) {
	good := writeFile(t, "good.yaml", "model: {provider: openai, name: m, base_url: 'http://127.0.0.1:9/v1'}\n")
	bad := writeFile(t, "bad.yaml", "model: {provider: openai, name: m}\nconfirmation: {tiemout: 5m}\n")
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"check-config", "-config", good}, nil, &out, &errOut); code != 0 {
		t.Fatalf("good config: exit %d: %s", code, errOut.String())
	}
	out.Reset()
	errOut.Reset()
	code := run(context.Background(), []string{"check-config", "-config", bad}, nil, &out, &errOut)
	if code == 0 || !strings.Contains(errOut.String(), "confirmation.tiemout") {
		t.Fatalf("bad config: exit %d, stderr %q", code, errOut.String())
	}
}

func TestUnknownCommand(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"frobnicate"}, nil, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "unknown command") {
		t.Fatalf("exit %d, %q", code, errOut.String())
	}
}

func TestMigrate(t *testing.T) {
	dsn := filepath.Join(t.TempDir(), "a.db")
	cfg := writeFile(t, "c.yaml", "storage: {dsn: '"+dsn+"'}\nmodel: {provider: openai, name: m}\n")
	var out, errOut bytes.Buffer
	for i := 0; i < 2; i++ {
		if code := run(context.Background(), []string{"migrate", "-config", cfg}, nil, &out, &errOut); code != 0 {
			t.Fatalf("migrate #%d: exit %d: %s", i, code, errOut.String())
		}
	}
	if _, err := os.Stat(dsn); err != nil {
		t.Fatalf("no database file: %v", err)
	}
}

func TestDiscordInvite(t *testing.T) {
	// The application id comes from GET /oauth2/applications/@me, not the token.
	rest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v9/oauth2/applications/@me" || r.Header.Get("Authorization") != "Bot MTIzNDU2Nzg5MDEyMzQ1Njc4.GhIjKl.secretpart" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, `{"id":"123456789012345678","name":"Airlock"}`)
	}))
	defer rest.Close()
	cfg := writeFile(t, "d.yaml", "model: {provider: openai, name: m}\ndiscord: {token: 'MTIzNDU2Nzg5MDEyMzQ1Njc4.GhIjKl.secretpart', api_url: '"+rest.URL+"/api/v9/', moderation_tools: [ban_member]}\n")
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"discord-invite", "-config", cfg}, nil, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	u := strings.TrimSpace(out.String())
	// Base permissions plus Ban Members (1<<2).
	if !strings.Contains(u, "client_id=123456789012345678") || !strings.Contains(u, "permissions=309237730308") || !strings.Contains(u, "scope=bot") {
		t.Fatalf("invite URL: %s", u)
	}
	if strings.Contains(u, "secretpart") {
		t.Fatal("the invite URL leaks the token")
	}
	noDiscord := writeFile(t, "n.yaml", "model: {provider: openai, name: m}\n")
	if code := run(context.Background(), []string{"discord-invite", "-config", noDiscord}, nil, &out, &errOut); code == 0 {
		t.Fatal("discord-invite without a discord section succeeded")
	}
}

// Issue 34 item 21: an exec tool whose program is a relative path that
// does not exist from the working directory (the example config started
// from outside the repository's root) is named, with why, by check-config
// and at the start of airlock chat, instead of every run failing with
// "no such file".
func TestRelativeProgramNotFoundIsSaid(t *testing.T) {
	const cfg = `
model: {provider: gemini, name: gemini-2.5-flash, api_key: ""}
storage: {driver: sqlite, dsn: %s}
tools:
  - {name: service_status, description: s, exec: {command: ["./examples/service.sh", "status"]}}
  - {name: ok, description: o, exec: {command: ["true"]}}
channels:
  - {platform: shell, id: "*", approvers: [local]}
`
	dir := t.TempDir() // the working directory is this package's, where ./examples is not
	path := writeFile(t, "c.yaml", fmt.Sprintf(cfg, filepath.Join(dir, "a.db")))
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"check-config", "-config", path}, nil, &out, &errOut); code != 0 ||
		!strings.Contains(out.String(), "warning: tools[0].exec.command: ./examples/service.sh (tool service_status) is not found from the working directory") ||
		strings.Contains(out.String(), "tools[1]") {
		t.Fatalf("check-config: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	out.Reset()
	if code := run(context.Background(), []string{"chat", "-config", path, "-log", filepath.Join(dir, "chat.log")}, strings.NewReader("/quit\n"), &out, &errOut); code != 0 ||
		!strings.Contains(out.String(), "airlock: Warning: tools[0].exec.command: ./examples/service.sh (tool service_status) is not found") {
		t.Fatalf("chat: exit %d\n%s%s", code, out.String(), errOut.String())
	}
}
