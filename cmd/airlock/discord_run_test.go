package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/gorilla/websocket"
)

// TestRunConnectsToDiscord checks the wiring of `airlock run` with a
// discord section: the gateway address comes from GET {api_url}gateway, the
// token identifies the session with the Message Content intent, and the
// moderation tools load.
func TestRunConnectsToDiscord(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	identified := make(chan map[string]any, 1)
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer conn.Close()
		_ = conn.WriteJSON(map[string]any{"op": 10, "d": map[string]any{"heartbeat_interval": 41250}})
		var ident struct {
			Op int            `json:"op"`
			D  map[string]any `json:"d"`
		}
		if conn.ReadJSON(&ident) != nil || ident.Op != 2 {
			return
		}
		identified <- ident.D
		_ = conn.WriteJSON(map[string]any{"op": 0, "s": 1, "t": "READY", "d": map[string]any{
			"v": 9, "session_id": "s1", "user": map[string]any{"id": "900000000000000001", "username": "Airlock", "bot": true},
			"guilds": []any{}, "application": map[string]any{"id": "900000000000000001"},
		}})
		for {
			var m struct{ Op int }
			if conn.ReadJSON(&m) != nil {
				return
			}
			if m.Op == 1 {
				_ = conn.WriteJSON(map[string]any{"op": 11})
			}
		}
	}))
	defer gw.Close()
	var mu sync.Mutex
	var paths []string
	rest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.Method+" "+r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/gateway") || strings.HasSuffix(r.URL.Path, "/gateway/bot") {
			fmt.Fprintf(w, `{"url":"ws://%s"}`, gw.Listener.Addr().String())
			return
		}
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"message":"Unknown","code":0}`)
	}))
	defer rest.Close()

	dir := t.TempDir()
	cfg := fmt.Sprintf(`listen: %s
storage: {dsn: %q}
model: {provider: openai, name: m, base_url: "http://127.0.0.1:9/v1"}
discord:
  token: ${DISCORD_BOT_TOKEN}
  api_url: %s/api/v9/
  moderation_tools: [ban_member, timeout_member]
channels: [{platform: discord, id: "*", approver_roles: ["700000000000000001"]}]
`, freeAddr(t), filepath.Join(dir, "a.db"), rest.URL)
	path := filepath.Join(dir, "airlock.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	_, logs := startRun(t, path, "DISCORD_BOT_TOKEN=OTAwMDAwMDAwMDAwMDAwMDAx.Gh.run-test-token")
	var ident map[string]any
	waitUntil(t, "IDENTIFY on the gateway from the api_url", func() bool {
		select {
		case ident = <-identified:
			return true
		default:
			return false
		}
	})
	if ident["token"] != "Bot OTAwMDAwMDAwMDAwMDAwMDAx.Gh.run-test-token" {
		t.Fatalf("identified with %v", ident["token"])
	}
	intents, _ := ident["intents"].(float64)
	if int(intents)&(1<<15) == 0 {
		t.Fatalf("intents %v lack Message Content", intents)
	}
	waitUntil(t, "connected", func() bool { return strings.Contains(logs.String(), "discord: connected") })
	if strings.Contains(logs.String(), "run-test-token") {
		t.Fatal("the token reached the logs")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(paths) == 0 || !strings.Contains(strings.Join(paths, " "), "/api/v9/gateway") {
		t.Fatalf("REST calls: %v", paths)
	}
}
