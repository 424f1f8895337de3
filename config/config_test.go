package config

import (
	"errors"
	"fmt"
	"os"
	"reflect"
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
	// With no environment at all: the model is off, everything else works.
	c, err := Parse(data, env(nil))
	if err != nil {
		t.Fatalf("config.example.yaml: %v", err)
	}
	if len(c.Tools) != 3 || c.Tools[1].Exec == nil || c.Tools[1].Exec.Timeout != 2*time.Minute {
		t.Fatalf("tools: %+v", c.Tools)
	}
	if !c.Model.Off() || c.Runbook("restart") == nil || len(c.Runbook("restart").Steps()) != 3 {
		t.Fatalf("model off %v, runbooks %v", c.Model.Off(), c.RunbookSet())
	}
	if c, err := Parse(data, env(map[string]string{"GEMINI_API_KEY": "k"})); err != nil || c.Model.Off() {
		t.Fatalf("with a key: %v", err)
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

// keyCases are invalid files, each with the key its error must name.
var keyCases = []struct {
	name, src, key string
}{
	{"unknown top key", minimal + "listne: x\n", "listne"},
	{"unknown nested key", minimal + "  nmae: x\n", "model.nmae"},
	{"unknown tool key", minimal + "tools:\n  - name: a\n    http: {url: 'http://x', methd: GET}\n", "tools[0].http.methd"},
	{"bad driver", minimal + "storage: {driver: mysql}\n", "storage.driver"},
	{"postgres needs dsn", minimal + "storage: {driver: postgres}\n", "storage.dsn"},
	{"bad provider", "model: {provider: claude, name: x}\n", "model.provider"},
	{"missing provider", "model: {name: x}\n", "model.provider"},
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
	{"requester groups only on slack", minimal + "channels: [{platform: discord, id: x, requester_groups: [S1]}]\n", "channels[0].requester_groups"},
	{"requester roles only on discord", minimal + "channels: [{platform: slack, id: x, requester_roles: [R1]}]\n", "channels[0].requester_roles"},
	{"empty requester", minimal + "channels: [{platform: slack, id: x, requesters: ['']}]\n", "channels[0].requesters[0]"},
	{"channel tool unknown", minimal + "channels: [{platform: slack, id: x, tools: [delte]}]\n", "channels[0].tools[0]"},
	{"channel twice", minimal + "channels: [{platform: slack, id: C1}, {platform: slack, id: C1}]\n", "channels[1].id"},
	{"negative turn limit", minimal + "limits: {turns_per_minute: -1}\n", "limits.turns_per_minute"},
	{"negative pending limit", minimal + "limits: {pending_per_channel: -2}\n", "limits.pending_per_channel"},
	{"unknown limit", minimal + "limits: {turns_per_hour: 3}\n", "limits.turns_per_hour"},
	{"tiny history", minimal + "  max_history_messages: 1\n", "model.max_history_messages"},
	{"tiny messages", minimal + "  max_message_chars: 10\n", "model.max_message_chars"},
	{"log format", minimal + "log: {format: xml}\n", "log.format"},
	{"log level", minimal + "log: {level: loud}\n", "log.level"},
	{"shutdown timeout", minimal + "shutdown_timeout: -1s\n", "shutdown_timeout"},
	{"approvals too many", minimal + "confirmation: {approvals: 11}\n", "confirmation.approvals"},
	{"grant too long", minimal + "confirmation: {grants: {duration: 48h}}\n", "confirmation.grants.duration"},
	{"grant key", minimal + "confirmation: {grants: {enable: true}}\n", "confirmation.grants.enable"},
	{"rule syntax", minimal + "confirmation: {rules: [{name: a, when: 'tool ==', action: ask}]}\n", "confirmation.rules[0].when"},
	{"rule action", minimal + "confirmation: {rules: [{name: a, when: 'true', action: maybe}]}\n", "confirmation.rules[0].action"},
	{"rule unknown key", minimal + "confirmation: {rules: [{name: a, when: 'true', action: ask, approver: [U1]}]}\n", "confirmation.rules[0].approver"},
	{"tool approvals", minimal + "tools: [{name: a, approvals: 99, http: {url: 'http://x'}}]\n", "tools[0].approvals"},
	{"tool risk", minimal + "tools: [{name: a, risk: severe, http: {url: 'http://x'}}]\n", "tools[0].risk"},
	{"rule risk", minimal + "confirmation: {rules: [{name: r, when: 'true', action: ask, risk: urgent}]}\n", "confirmation.rules[0].risk"},
	{"approvals channel on shell", minimal + "channels: [{platform: shell, id: '*', approvals_channel: C1234}]\n", "channels[0].approvals_channel"},
	{"approvals channel star", minimal + "channels: [{platform: slack, id: C0INC, approvals_channel: '*'}]\n", "channels[0].approvals_channel"},
	{"approvals channel dm value", minimal + "channels: [{platform: slack, id: C0INC, approvals_channel: dm}]\n", "channels[0].approvals_channel"},
	{"approvals channel on dm entry", minimal + "channels: [{platform: slack, id: C0INC}, {platform: slack, id: dm, approvals_channel: C0APPROVALS}]\n", "channels[1].approvals_channel"},
	{"approvals channel not slack", minimal + "channels: [{platform: slack, id: C0INC, approvals_channel: '#approvals'}]\n", "channels[0].approvals_channel"},
	{"approvals channel discord id on slack", minimal + "channels: [{platform: slack, id: C0INC, approvals_channel: '123456789012345678'}]\n", "channels[0].approvals_channel"},
	{"approvals channel slack id on discord", minimal + "channels: [{platform: discord, id: '1', approvals_channel: C0APPROVALS}]\n", "channels[0].approvals_channel"},
	{"approvals channel is itself", minimal + "channels: [{platform: slack, id: C0INC, approvals_channel: C0INC}]\n", "channels[0].approvals_channel"},
	{"notify unknown", minimal + "channels: [{platform: slack, id: C0INC, notify: [dm, email]}]\n", "channels[0].notify[1]"},
	{"notify on shell", minimal + "channels: [{platform: shell, id: '*', notify: [dm]}]\n", "channels[0].notify[0]"},
	{"notify not a list", minimal + "channels: [{platform: slack, id: C0INC, notify: {dm: true}}]\n", "channels[0].notify"},
	{"escalation after missing", minimal + "confirmation: {escalation: [{mention: [U0LEAD]}]}\n", "confirmation.escalation[0].after"},
	{"escalation after zero", minimal + "confirmation: {escalation: [{after: 0s, mention: [U0LEAD]}]}\n", "confirmation.escalation[0].after"},
	{"escalation after negative", minimal + "confirmation: {escalation: [{after: -1m, mention: [U0LEAD]}]}\n", "confirmation.escalation[0].after"},
	{"escalation after without unit", minimal + "confirmation: {escalation: [{after: 10, mention: [U0LEAD]}]}\n", "confirmation.escalation[0].after"},
	{"escalation not increasing", minimal + "confirmation: {escalation: [{after: 10m, mention: [U0LEAD]}, {after: 10m, mention: [U0BOSS]}]}\n", "confirmation.escalation[1].after"},
	{"escalation decreasing", minimal + "confirmation: {escalation: [{after: 10m, mention: [U0LEAD]}, {after: 5m, mention: [U0BOSS]}]}\n", "confirmation.escalation[1].after"},
	{"escalation at timeout", minimal + "confirmation: {timeout: 30m, escalation: [{after: 30m, mention: [U0LEAD]}]}\n", "confirmation.escalation[0].after"},
	{"escalation after default timeout", minimal + "confirmation: {escalation: [{after: 1h, mention: [U0LEAD]}]}\n", "confirmation.escalation[0].after"},
	{"escalation empty step", minimal + "confirmation: {escalation: [{after: 10m}]}\n", "confirmation.escalation[0]"},
	{"escalation empty lists", minimal + "confirmation: {escalation: [{after: 10m, mention: [], approvers: []}]}\n", "confirmation.escalation[0]"},
	{"escalation unknown key", minimal + "confirmation: {escalation: [{after: 10m, mentions: [U0LEAD]}]}\n", "confirmation.escalation[0].mentions"},
	{"escalation mention markup", minimal + "confirmation: {escalation: [{after: 10m, mention: ['<!here>']}]}\n", "confirmation.escalation[0].mention[0]"},
	{"escalation mention at", minimal + "confirmation: {escalation: [{after: 10m, mention: [U0LEAD, '@alice']}]}\n", "confirmation.escalation[0].mention[1]"},
	{"escalation mention bare role", minimal + "confirmation: {escalation: [{after: 10m, mention: ['role:']}]}\n", "confirmation.escalation[0].mention[0]"},
	{"escalation mention role not digits", minimal + "confirmation: {escalation: [{after: 10m, mention: ['role:S0ONCALL']}]}\n", "confirmation.escalation[0].mention[0]"},
	{"escalation approver", minimal + "confirmation: {escalation: [{after: 10m, approvers: ['<@U0LEAD>']}]}\n", "confirmation.escalation[0].approvers[0]"},
	{"escalation approver group", minimal + "confirmation: {escalation: [{after: 10m, approver_groups: [U0LEAD]}]}\n", "confirmation.escalation[0].approver_groups[0]"},
	{"escalation approver role", minimal + "confirmation: {escalation: [{after: 10m, approver_roles: ['role:123']}]}\n", "confirmation.escalation[0].approver_roles[0]"},
	{"escalation second step", minimal + "confirmation: {escalation: [{after: 5m, mention: [U0LEAD]}, {after: 10m, mention: [everyone]}]}\n", "confirmation.escalation[1].mention[0]"},
	{"escalation too many", minimal + "confirmation:\n  escalation:\n" + strings.Repeat("    - {after: 1m, mention: [U0LEAD]}\n", 11), "confirmation.escalation"},
	{"escalation mention placeholder", minimal + "confirmation: {escalation: [{after: 10m, mention: [S0ONCALL_LEADS]}]}\n", "confirmation.escalation[0].mention[0]"},
	{"mapping for a duration", minimal + "confirmation: {timeout: {minutes: 3}}\n", "confirmation.timeout"},
	{"escalation not a list", minimal + "confirmation: {escalation: {after: 10m}}\n", "confirmation.escalation"},
	// The sections' own errors (tools, mcp_servers, rules, events, telemetry)
	// and what spans sections.
	{"tool header name", minimal + "tools: [{name: a, http: {url: 'http://x/', headers: {'X Bad': v}}}]\n", "tools[0].http.headers"},
	{"tool header name colon", minimal + "tools: [{name: a, http: {url: 'http://x/', headers: {'X:Y': v}}}]\n", "tools[0].http.headers"},
	{"tool header name non-ascii", minimal + "tools: [{name: a, http: {url: 'http://x/', headers: {'Xé': v}}}]\n", "tools[0].http.headers"},
	{"tool header value", minimal + "tools: [{name: a, http: {url: 'http://x/', headers: {X-A: \"v\\r\\nX-B: w\"}}}]\n", "tools[0].http.headers.X-A"},
	{"tool method", minimal + "tools: [{name: a, http: {method: FETCH, url: 'http://x/'}}]\n", "tools[0].http.method"},
	{"tool url required", minimal + "tools: [{name: a, http: {}}]\n", "tools[0].http.url"},
	{"tool url templated host", minimal + "tools: [{name: a, http: {url: 'https://{{.h}}/x'}}]\n", "tools[0].http.url"},
	{"tool url template", minimal + "tools: [{name: a, http: {url: 'http://x/{{.a'}}]\n", "tools[0].http.url"},
	{"tool http timeout", minimal + "tools: [{name: a, http: {url: 'http://x/', timeout: -1s}}]\n", "tools[0].http.timeout"},
	{"tool name", minimal + "tools: [{name: 'a b', http: {url: 'http://x/'}}]\n", "tools[0].name"},
	{"tool name required", minimal + "tools: [{http: {url: 'http://x/'}}]\n", "tools[0].name"},
	{"tool both executors", minimal + "tools: [{name: a, http: {url: 'http://x/'}, exec: {command: ['true']}}]\n", "tools[0]"},
	{"tool duplicate", minimal + "tools: [{name: a, http: {url: 'http://x/'}}, {name: a, http: {url: 'http://x/'}}]\n", "tools[1].name"},
	{"tool schema", minimal + "tools: [{name: a, parameters: {type: string}, http: {url: 'http://x/'}}]\n", "tools[0].parameters"},
	{"tool summary", minimal + "tools: [{name: a, summary: '{{.a', http: {url: 'http://x/'}}]\n", "tools[0].summary"},
	{"tool exec command", minimal + "tools: [{name: a, exec: {}}]\n", "tools[0].exec.command"},
	{"tool exec program templated", minimal + "tools: [{name: a, exec: {command: ['{{.p}}']}}]\n", "tools[0].exec.command[0]"},
	{"tool exec argv template", minimal + "tools: [{name: a, exec: {command: [echo, '{{if}}']}}]\n", "tools[0].exec.command[1]"},
	{"tool exec env", minimal + "tools: [{name: a, exec: {command: ['true'], env: {'A=B': x}}}]\n", "tools[0].exec.env"},
	{"tool exec timeout", minimal + "tools: [{name: a, exec: {command: ['true'], timeout: -1s}}]\n", "tools[0].exec.timeout"},
	{"mcp name", minimal + "mcp_servers: [{name: Git-Hub, command: [x]}]\n", "mcp_servers[0].name"},
	{"mcp neither", minimal + "mcp_servers: [{name: g}]\n", "mcp_servers[0]"},
	{"mcp header name", minimal + "mcp_servers: [{name: g, url: 'https://x/mcp', headers: {'A B': v}}]\n", "mcp_servers[0].headers"},
	{"mcp header value", minimal + "mcp_servers: [{name: g, url: 'https://x/mcp', headers: {A: \"v\\nB: w\"}}]\n", "mcp_servers[0].headers.A"},
	{"mcp duplicate", minimal + "mcp_servers: [{name: g, command: [x]}, {name: g, command: [y]}]\n", "mcp_servers[1].name"},
	{"mcp overlap", minimal + "mcp_servers: [{name: a, command: [x]}, {name: a_, command: [y]}]\n", "mcp_servers[1].name"},
	{"mcp summary template", minimal + "mcp_servers: [{name: g, command: [x], summaries: {t: '{{.a'}}]\n", "mcp_servers[0].summaries.t"},
	{"mcp summary not listed", minimal + "mcp_servers: [{name: g, command: [x], tools: [u], summaries: {t: 'x'}}]\n", "mcp_servers[0].summaries.t"},
	{"mcp timeout", minimal + "mcp_servers: [{name: g, command: [x], timeout: -1s}]\n", "mcp_servers[0].timeout"},
	{"tool under an mcp prefix", minimal + "tools: [{name: g__x, http: {url: 'http://x/'}}]\nmcp_servers: [{name: g, command: [x]}]\n", "tools[0].name"},
	{"gate names an mcp tool", minimal + "mcp_servers: [{name: g, command: [x]}]\nconfirmation: {tools: [g__x, h__x]}\n", "confirmation.tools[1]"},
	{"channel names a moderation tool", minimal + "discord: {token: abc, moderation_tools: [ban_member]}\nchannels: [{platform: discord, id: '1', tools: [ban_member, kick_member]}]\n", "channels[0].tools[1]"},
	{"rule name required", minimal + "confirmation: {rules: [{when: 'true', action: ask}]}\n", "confirmation.rules[0].name"},
	{"rule name pattern", minimal + "confirmation: {rules: [{name: A, when: 'true', action: ask}]}\n", "confirmation.rules[0].name"},
	{"rule duplicate", minimal + "confirmation: {rules: [{name: a, when: 'true', action: ask}, {name: a, when: 'true', action: ask}]}\n", "confirmation.rules[1].name"},
	{"rule action required", minimal + "confirmation: {rules: [{name: a, when: 'true'}]}\n", "confirmation.rules[0].action"},
	{"rule approvals", minimal + "confirmation: {rules: [{name: a, when: 'true', action: ask, approvals: 11}]}\n", "confirmation.rules[0].approvals"},
	{"rule deny approvers", minimal + "confirmation: {rules: [{name: a, when: 'true', action: deny, approvers: [U1]}]}\n", "confirmation.rules[0].approvers"},
	{"rule deny grantable", minimal + "confirmation: {rules: [{name: a, when: 'true', action: deny, grantable: true}]}\n", "confirmation.rules[0].grantable"},
	{"rule ask message", minimal + "confirmation: {rules: [{name: a, when: 'true', action: ask, message: no}]}\n", "confirmation.rules[0].message"},
	{"rule empty approver", minimal + "confirmation: {rules: [{name: a, when: 'true', action: ask, approver_groups: [' ']}]}\n", "confirmation.rules[0].approver_groups[0]"},
	{"rule when required", minimal + "confirmation: {rules: [{name: a, action: ask}]}\n", "confirmation.rules[0].when"},
	{"rule when not bool", minimal + "confirmation: {rules: [{name: a, when: 'tool', action: ask}]}\n", "confirmation.rules[0].when"},
	{"rule when unknown variable", minimal + "confirmation: {rules: [{name: a, when: 'nope == 1', action: ask}]}\n", "confirmation.rules[0].when"},
	{"webhook url", minimal + "events: {webhooks: [{url: 'ftp://x/', secret: 0123456789abcdef}]}\n", "events.webhooks[0].url"},
	{"webhook url fragment", minimal + "events: {webhooks: [{url: 'https://x/#f', secret: 0123456789abcdef}]}\n", "events.webhooks[0].url"},
	{"webhook secret", minimal + "events: {webhooks: [{url: 'https://x/', secret: short}]}\n", "events.webhooks[0].secret"},
	{"webhook duplicate", minimal + "events: {webhooks: [{url: 'https://x/', secret: 0123456789abcdef}, {url: 'https://x/', secret: 0123456789abcdef}]}\n", "events.webhooks[1].url"},
	{"webhook result bytes", minimal + "events: {webhooks: [{url: 'https://x/', secret: 0123456789abcdef, max_result_bytes: -1}]}\n", "events.webhooks[0].max_result_bytes"},
	{"webhook event", minimal + "events: {webhooks: [{url: 'https://x/', secret: 0123456789abcdef, events: [tool_calls]}]}\n", "events.webhooks[0].events[0]"},
	{"webhook event twice", minimal + "events: {webhooks: [{url: 'https://x/', secret: 0123456789abcdef, events: [decision, decision]}]}\n", "events.webhooks[0].events[1]"},
	{"telemetry endpoint", minimal + "telemetry: {otlp_endpoint: 'grpc://c:4317'}\n", "telemetry.otlp_endpoint"},
	{"telemetry header name", minimal + "telemetry: {otlp_endpoint: 'http://c:4318', headers: {'A B': v}}\n", "telemetry.headers"},
	{"telemetry header set by exporter", minimal + "telemetry: {otlp_endpoint: 'http://c:4318', headers: {Content-Type: x}}\n", "telemetry.headers.Content-Type"},
	{"telemetry header value", minimal + "telemetry: {otlp_endpoint: 'http://c:4318', headers: {A: \"v\\nB: w\"}}\n", "telemetry.headers.A"},
	{"telemetry service name", minimal + "telemetry: {service_name: '  '}\n", "telemetry.service_name"},
	{"negative tool rounds", minimal + "  max_tool_rounds: -1\n", "model.max_tool_rounds"},
	{"model base url", "model: {provider: openai, name: m, base_url: 'ftp://x/'}\n", "model.base_url"},
	{"limits not a mapping", minimal + "limits: 3\n", "limits"},
	{"remind before", minimal + "confirmation: {remind_before: -1m}\n", "confirmation.remind_before"},
	{"discord api url", minimal + "discord: {token: abc, api_url: 'ftp://x/'}\n", "discord.api_url"},
	{"slack api url", minimal + "slack: {bot_token: x, app_token: y, api_url: 'ftp://x/'}\n", "slack.api_url"},
	{"empty discord token", minimal + "discord: {token: ''}\n", "discord.token"},
	{"web without base_url", minimal + "web: {oidc: {issuer: 'https://id.example.com', client_id: a}}\n", "web.base_url"},
	{"web over plain http", minimal + "web: {base_url: 'http://airlock.example.com', oidc: {issuer: 'https://id.example.com', client_id: a}, people: [{email: a@example.com, slack: UAA1}]}\n", "web.base_url"},
	{"web without an issuer", minimal + "web: {base_url: 'https://airlock.example.com', oidc: {client_id: a}, people: [{email: a@example.com, slack: UAA1}]}\n", "web.oidc.issuer"},
	{"web without people", minimal + "web: {base_url: 'https://airlock.example.com', oidc: {issuer: 'https://id.example.com', client_id: a}}\n", "web.people"},
	{"web person without chat", minimal + "web: {base_url: 'https://airlock.example.com', oidc: {issuer: 'https://id.example.com', client_id: a}, people: [{email: a@example.com}]}\n", "web.people[0]"},
	{"web person's email twice", minimal + "web: {base_url: 'https://airlock.example.com', oidc: {issuer: 'https://id.example.com', client_id: a}, people: [{email: a@example.com, slack: UAA1}, {email: A@example.com, slack: UBB1}]}\n", "web.people[1].email"},
	{"step-up tier", minimal + "confirmation: {step_up: {severe: sso}}\n", "confirmation.step_up.severe"},
	{"step-up method", minimal + "confirmation: {step_up: {critical: mfa}}\n", "confirmation.step_up.critical"},
	{"step-up without web", minimal + "confirmation: {step_up: {high: sso}}\n", "confirmation.step_up.high"},
	{"web auditor not a person", minimal + "web: {base_url: 'https://airlock.example.com', oidc: {issuer: 'https://id.example.com', client_id: a}, people: [{email: a@example.com, slack: UAA1}], auditors: [b@example.com]}\n", "web.auditors[0]"},
	{"web unknown key", minimal + "web: {base_url: 'https://airlock.example.com', auditor: [a@example.com]}\n", "web.auditor"},
}

func TestErrorsNameTheKey(t *testing.T) {
	for _, tc := range keyCases {
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

func TestLimitsAndHistoryDefaults(t *testing.T) {
	c, err := Parse([]byte(minimal), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Limits.Turns() != 6 || c.Limits.Pending() != 20 || c.Model.MaxHistoryMessages != 100 || c.Model.MaxMessageChars != 8000 {
		t.Fatalf("defaults: limits %d/%d, history %d/%d", c.Limits.Turns(), c.Limits.Pending(), c.Model.MaxHistoryMessages, c.Model.MaxMessageChars)
	}
	c, err = Parse([]byte(minimal+"limits: {turns_per_minute: 0, pending_per_channel: 0}\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Limits.Turns() != 0 || c.Limits.Pending() != 0 {
		t.Fatal("0 must disable the limits")
	}
}

func TestPolicyDefaults(t *testing.T) {
	c, err := Parse([]byte(minimal), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Confirmation.SelfApproval || c.Confirmation.Grants.For() != time.Hour || c.Confirmation.RuleSet().Len() != 0 {
		t.Fatalf("defaults: self-approval %v, grants %v", c.Confirmation.SelfApproval, c.Confirmation.Grants.For())
	}
	c, err = Parse([]byte(minimal+`confirmation:
  grants: {enabled: false, duration: 2h}
  rules:
    - {name: prod, when: 'tool == "deploy" && args.env == "production"', action: ask, approvals: 2}
`), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Confirmation.Grants.For() != 0 || c.Confirmation.RuleSet().Len() != 1 {
		t.Fatalf("grants %v, rules %d", c.Confirmation.Grants.For(), c.Confirmation.RuleSet().Len())
	}
}

func TestChannelEntries(t *testing.T) {
	src := minimal + `tools:
  - {name: status, http: {url: "http://127.0.0.1:9/s"}}
channels:
  - {platform: slack, id: dm, approvers: [U1]}
  - {platform: slack, id: "*", requesters: [U2], requester_groups: [S1], tools: [status]}
  - {platform: discord, id: "1", requester_roles: ["2"], tools: []}
`
	c, err := Parse([]byte(src), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Channels[0].Tools != nil {
		t.Fatal("absent tools must mean all tools (nil)")
	}
	if c.Channels[2].Tools == nil || len(c.Channels[2].Tools) != 0 {
		t.Fatal("tools: [] must mean no tools")
	}
	if c.Channels[1].Requesters[0] != "U2" || c.Channels[1].RequesterGroups[0] != "S1" || c.Channels[2].RequesterRoles[0] != "2" {
		t.Fatalf("requesters: %+v", c.Channels)
	}
}

func TestRoutingAndEscalation(t *testing.T) {
	src := minimal + `confirmation:
  timeout: 30m
  escalation:
    - after: 10m
      mention: [S0ONCALLLEADS, U0LEAD, W0ENT, "123456789012345678", "role:222222222222222222"]
    - after: 20m
      approvers: [U0LEAD, "333333333333333333"]
      approver_groups: [S0LEADS]
      approver_roles: ["444444444444444444"]
channels:
  - platform: slack
    id: C0INCIDENT
    approvers: [U0ALICE]
    approvals_channel: C0APPROVALS
    notify: [dm]
  - {platform: slack, id: "*", approvals_channel: G0PRIVATE}
  - {platform: slack, id: dm, approvers: [U0ALICE], notify: [dm]}
  - {platform: discord, id: "111", approvals_channel: "999999999999999999", notify: [dm]}
  - {platform: shell, id: "*"}
`
	c, err := Parse([]byte(src), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	ch := c.Channels
	if ch[0].ApprovalsChannel != "C0APPROVALS" || !ch[0].NotifyDMs() || ch[1].ApprovalsChannel != "G0PRIVATE" || ch[1].NotifyDMs() {
		t.Fatalf("slack entries: %+v", ch[:2])
	}
	if ch[2].ApprovalsChannel != "" || !ch[2].NotifyDMs() || ch[3].ApprovalsChannel != "999999999999999999" || !ch[3].NotifyDMs() || ch[4].NotifyDMs() {
		t.Fatalf("entries: %+v", ch[2:])
	}
	esc := c.Confirmation.Escalation
	if len(esc) != 2 || esc[0].After != 10*time.Minute || esc[1].After != 20*time.Minute {
		t.Fatalf("escalation: %+v", esc)
	}
	m := esc[0].MentionSet()
	if !reflect.DeepEqual(m.Users, []string{"U0LEAD", "W0ENT", "123456789012345678"}) || !reflect.DeepEqual(m.Groups, []string{"S0ONCALLLEADS"}) || !reflect.DeepEqual(m.Roles, []string{"222222222222222222"}) {
		t.Fatalf("mention set: %+v", m)
	}
	if !esc[0].ApproverSet().Empty() || !esc[1].MentionSet().Empty() {
		t.Fatalf("step 0 widens %+v, step 1 mentions %+v", esc[0].ApproverSet(), esc[1].MentionSet())
	}
	a := esc[1].ApproverSet()
	if !reflect.DeepEqual(a.Users, []string{"U0LEAD", "333333333333333333"}) || a.Groups[0] != "S0LEADS" || a.Roles[0] != "444444444444444444" {
		t.Fatalf("approver set: %+v", a)
	}

	// Without the keys: no routing, no escalation.
	c, err = Parse([]byte(minimal+"channels: [{platform: slack, id: C0INC}]\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Channels[0].ApprovalsChannel != "" || c.Channels[0].Notify != nil || c.Confirmation.Escalation != nil {
		t.Fatalf("defaults: %+v %+v", c.Channels[0], c.Confirmation.Escalation)
	}
}

func TestEscalationStepLimit(t *testing.T) {
	steps := ""
	for i := 1; i <= 10; i++ {
		steps += fmt.Sprintf("    - {after: %dm, mention: [U0LEAD]}\n", i)
	}
	c, err := Parse([]byte(minimal+"confirmation:\n  escalation:\n"+steps), env(nil))
	if err != nil || len(c.Confirmation.Escalation) != 10 {
		t.Fatalf("10 steps: %v", err)
	}
	_, err = Parse([]byte(minimal+"confirmation:\n  escalation:\n"+steps+"    - {after: 11m, mention: [U0LEAD]}\n"), env(nil))
	var ce *Error
	if !errors.As(err, &ce) || ce.Key != "confirmation.escalation" || !strings.Contains(err.Error(), "at most 10") {
		t.Fatalf("11 steps: %v", err)
	}
}

func TestSecretsAreTheExpandedValues(t *testing.T) {
	src := minimal + `  api_key: ${KEY}
  system_prompt: "${PROMPT:-default-prompt-text}"
listen: ":${PORT}"
`
	c, err := Parse([]byte(src), env(map[string]string{"KEY": "sk-live-abcdef", "PORT": "8080"}))
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(c.Secrets(), ",")
	if !strings.Contains(got, "sk-live-abcdef") || !strings.Contains(got, "default-prompt-text") {
		t.Fatalf("secrets %q", got)
	}
	if strings.Contains(got, "8080") {
		t.Fatalf("a short value (under 6 characters) counted as a secret: %q", got)
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

func TestSecretsFromFiles(t *testing.T) {
	dir := t.TempDir()
	secret := dir + "/token"
	if err := os.WriteFile(secret, []byte("xoxb-from-a-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	src := minimal + "  api_key: ${file:" + secret + "}\n"
	c, err := Parse([]byte(src), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Model.APIKey != "xoxb-from-a-file" || !strings.Contains(strings.Join(c.Secrets(), ","), "xoxb-from-a-file") {
		t.Fatalf("api_key %q, secrets %q", c.Model.APIKey, c.Secrets())
	}
	_, err = Parse([]byte(minimal+"  api_key: ${file:"+dir+"/missing}\n"), env(nil))
	if err == nil || !strings.Contains(err.Error(), "model.api_key:") || !strings.Contains(err.Error(), dir+"/missing") {
		t.Fatalf("missing file: %v", err)
	}
}
