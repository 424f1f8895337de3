package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/adapters/discord/discordtest"
)

// TestRunConnectsToDiscord checks the wiring of `airlock run` with a
// discord section: the gateway address comes from GET {api_url}gateway, the
// token identifies the session with the Message Content intent, and the
// moderation tools load.
func TestRunConnectsToDiscord(t *testing.T) {
	skipShort(t)
	fd := discordtest.New(t, true)

	dir := t.TempDir()
	cfg := fmt.Sprintf(`listen: %s
storage: {dsn: %q}
model: {provider: openai, name: m, base_url: "http://127.0.0.1:9/v1"}
discord:
  token: ${DISCORD_BOT_TOKEN}
  api_url: %s
  moderation_tools: [ban_member, timeout_member]
channels: [{platform: discord, id: "*", approver_roles: ["700000000000000001"]}]
`, freeAddr(t), filepath.Join(dir, "a.db"), fd.APIURL())
	path := writeConfig(t, dir, cfg)
	_, logs := startRun(t, path, "DISCORD_BOT_TOKEN="+discordtest.Token)
	var ident map[string]any
	waitUntil(t, "IDENTIFY on the gateway from the api_url", func() bool {
		select {
		case ident = <-fd.Identify():
			return true
		default:
			return false
		}
	})
	if ident["token"] != "Bot "+discordtest.Token {
		t.Fatalf("identified with %v", ident["token"])
	}
	intents, _ := ident["intents"].(float64)
	if int(intents)&(1<<15) == 0 {
		t.Fatalf("intents %v lack Message Content", intents)
	}
	waitUntil(t, "connected", func() bool { return strings.Contains(logs.String(), "discord: connected") })
	if strings.Contains(logs.String(), "secret-part-never-logged") {
		t.Fatal("the token reached the logs")
	}
	if len(fd.Recorded("GET", "/gateway*")) == 0 {
		t.Fatalf("REST calls: %v", fd.AllCalls())
	}
}
