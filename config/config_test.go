package config

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

const minimal = `
model:
  provider: openai
  name: test-model
  base_url: http://127.0.0.1:9/v1
`

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestDefaults(t *testing.T) {
	c, err := Parse([]byte(minimal), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != ":8080" || c.Storage.Driver != "sqlite" || c.Storage.DSN != "airlock.db" {
		t.Fatalf("defaults: %+v", c)
	}
	if c.Model.MaxToolRounds != 8 || c.Confirmation.Timeout != 30*time.Minute || !c.Confirmation.FlagHonoured() {
		t.Fatalf("defaults: %+v", c)
	}
}

func TestExampleFileIsValid(t *testing.T) {
	data, err := os.ReadFile("../config.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse(data, env(map[string]string{"GEMINI_API_KEY": "k"}))
	if err != nil {
		t.Fatalf("config.example.yaml: %v", err)
	}
	if len(c.Tools) != 2 || c.Tools[1].Exec == nil || c.Tools[1].Exec.Timeout != 2*time.Minute {
		t.Fatalf("tools: %+v", c.Tools)
	}
}

func TestEnvExpansion(t *testing.T) {
	src := minimal + `  api_key: ${KEY}
  system_prompt: "${PROMPT:-be brief}"
  max_tool_rounds: ${ROUNDS}
`
	c, err := Parse([]byte(src), env(map[string]string{"KEY": "sk-secret", "ROUNDS": "3"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Model.APIKey != "sk-secret" || c.Model.SystemPrompt != "be brief" || c.Model.MaxToolRounds != 3 {
		t.Fatalf("expanded: %+v", c.Model)
	}
}

func TestEnvValueCannotAddStructure(t *testing.T) {
	src := minimal + "  api_key: ${KEY}\n"
	c, err := Parse([]byte(src), env(map[string]string{"KEY": "x\nstorage:\n  driver: postgres"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Storage.Driver != "sqlite" || !strings.Contains(c.Model.APIKey, "driver: postgres") {
		t.Fatalf("an env value changed the structure: %+v", c)
	}
}

func TestErrorsNameTheKey(t *testing.T) {
	cases := []struct {
		name, src, key string
	}{
		{"unknown top key", minimal + "listne: x\n", "listne"},
		{"unknown nested key", minimal + "  nmae: x\n", "model.nmae"},
		{"unknown tool key", minimal + "tools:\n  - name: a\n    http: {url: 'http://x', methd: GET}\n", "tools[0].http.methd"},
		{"bad driver", minimal + "storage: {driver: mysql}\n", "storage.driver"},
		{"postgres needs dsn", minimal + "storage: {driver: postgres}\n", "storage.dsn"},
		{"bad provider", "model: {provider: claude, name: x}\n", "model.provider"},
		{"missing provider", "model: {name: x}\n", "model.provider"},
		{"gemini needs key", "model: {provider: gemini, name: x}\n", "model.api_key"},
		{"missing name", "model: {provider: openai}\n", "model.name"},
		{"timeout without unit", minimal + "confirmation: {timeout: 90}\n", "confirmation.timeout"},
		{"gate names no tool", minimal + "confirmation: {tools: [delte]}\n", "confirmation.tools[0]"},
		{"bad platform", minimal + "channels: [{platform: irc, id: x}]\n", "channels[0].platform"},
		{"channel id", minimal + "channels: [{platform: slack}]\n", "channels[0].id"},
		{"unset env", minimal + "  api_key: ${NOPE}\n", "model.api_key"},
		{"wrong type", minimal + "  max_tool_rounds: lots\n", "model.max_tool_rounds"},
		{"list for a mapping", "model: [a]\n", "model"},
		{"slack without bot token", minimal + "slack: {app_token: x}\n", "slack.bot_token"},
		{"slack socket needs app token", minimal + "slack: {bot_token: x}\n", "slack.app_token"},
		{"slack http needs secret", minimal + "slack: {bot_token: x, mode: http}\n", "slack.signing_secret"},
		{"slack bad mode", minimal + "slack: {bot_token: x, mode: rtm}\n", "slack.mode"},
		{"discord token prefix", minimal + "discord: {token: 'Bot abc'}\n", "discord.token"},
		{"discord bad moderation tool", minimal + "discord: {token: abc, moderation_tools: [nuke_server]}\n", "discord.moderation_tools[0]"},
		{"groups only on slack", minimal + "channels: [{platform: discord, id: x, approver_groups: [S1]}]\n", "channels[0].approver_groups"},
		{"roles only on discord", minimal + "channels: [{platform: slack, id: x, approver_roles: [R1]}]\n", "channels[0].approver_roles"},
		{"tool without executor", minimal + "tools: [{name: a}]\n", "tools[0]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.src), env(nil))
			if err == nil {
				t.Fatal("want an error")
			}
			if !strings.Contains(err.Error(), tc.key+":") {
				t.Fatalf("error %q does not name %s", err, tc.key)
			}
		})
	}
}

func TestUnsetEnvNamesVariableNotValue(t *testing.T) {
	_, err := Parse([]byte(minimal+"  api_key: ${MISSING_KEY}\n"), env(nil))
	var ce *Error
	if !errors.As(err, &ce) || ce.Key != "model.api_key" || !strings.Contains(err.Error(), "MISSING_KEY") {
		t.Fatalf("err = %v", err)
	}
}

func TestDisabledConfirmation(t *testing.T) {
	c, err := Parse([]byte(minimal+"confirmation: {enabled: false}\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Confirmation.FlagHonoured() {
		t.Fatal("enabled: false must stop honouring the flag")
	}
}

func TestMalformedYAML(t *testing.T) {
	for _, src := range []string{"", "- a\n- b\n", "model: [\n", "model: {provider: openai, name: x}\nmodel: {}\n"} {
		if _, err := Parse([]byte(src), env(nil)); err == nil {
			t.Errorf("%q: want an error", src)
		}
	}
}

func TestPlatformSections(t *testing.T) {
	src := minimal + `slack:
  bot_token: ${SLACK_BOT_TOKEN}
  app_token: ${SLACK_APP_TOKEN}
discord:
  token: ${DISCORD_BOT_TOKEN}
  moderation_tools: [ban_member]
confirmation: {tools: [ban_member]}
channels:
  - {platform: slack, id: C1, approvers: [U1], approver_groups: [S1]}
  - {platform: discord, id: "*", approver_roles: ["123"]}
`
	c, err := Parse([]byte(src), env(map[string]string{"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xapp-1", "DISCORD_BOT_TOKEN": "abc"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Slack.Mode != "socket" || c.Slack.APIURL != "https://slack.com/api/" || c.Discord.APIURL != "https://discord.com/api/v9/" {
		t.Fatalf("defaults: %+v %+v", c.Slack, c.Discord)
	}
	if c.Channels[0].ApproverGroups[0] != "S1" || c.Channels[1].ApproverRoles[0] != "123" {
		t.Fatalf("channels: %+v", c.Channels)
	}
}
