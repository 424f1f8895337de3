package config

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/keyerr"
)

const gatewayBase = minimal + `slack: {bot_token: xoxb-1, app_token: xapp-1}
channels: [{platform: slack, id: C0OPS, approvers: [U0BOB]}]
`

func gatewayClient(fields string) string {
	return "gateway:\n  clients:\n    - {name: alice-laptop, token: \"${AIRLOCK_CLIENT_ALICE}\", acts_for: U0ALICE, channel: {platform: slack, id: C0OPS}, ask: [Bash, \"mcp__*\"]" + fields + "}\n"
}

// A gateway client is read with its defaults, and its token, given as
// ${ENV}, is a secret the config scrubs.
func TestGatewayClientLoads(t *testing.T) {
	token := strings.Repeat("k", 40)
	c, err := Parse([]byte(gatewayBase+gatewayClient("")), env(map[string]string{"AIRLOCK_CLIENT_ALICE": token}))
	if err != nil {
		t.Fatal(err)
	}
	cl := c.Gateway.Clients[0]
	if cl.Token != token || cl.MaxPending != 20 || cl.RequestsPerMinute != 120 {
		t.Fatalf("client %+v", cl)
	}
	if !slices.Contains(c.Secrets(), token) {
		t.Fatal("the token is not among the secrets Airlock scrubs")
	}
}

// A client whose channel Airlock does not serve, whose platform is not
// configured, whose acts_for is no user id there, or with an unknown key,
// is refused naming the key; the token never appears in the error.
func TestGatewayClientRefused(t *testing.T) {
	token := strings.Repeat("k", 40)
	for want, src := range map[string]string{
		"gateway.clients[0].channel.id":       strings.Replace(gatewayBase, "C0OPS, approvers", "C0DEV, approvers", 1) + gatewayClient(""),
		"gateway.clients[0].channel.platform": minimal + "channels: [{platform: slack, id: C0OPS}]\n" + gatewayClient(""),
		"gateway.clients[0].acts_for":         gatewayBase + strings.Replace(gatewayClient(""), "U0ALICE", "alice", 1),
		"gateway.clients[0].token":            gatewayBase + strings.Replace(gatewayClient(""), "\"${AIRLOCK_CLIENT_ALICE}\"", "short", 1),
		"gateway.clients[0].acts_as":          gatewayBase + gatewayClient(", acts_as: U0BOB"),
		"gateway.mcp.path":                    gatewayBase + "gateway: {mcp: {path: /mcp}}\n",
		"gateway.mcp.hold":                    gatewayBase + strings.Replace(gatewayClient(""), "gateway:\n", "gateway:\n  mcp: {path: /mcp, hold: 10m}\n", 1),
		"gateway.clients[0].tools[0]":         gatewayBase + gatewayClient(`, tools: ["["]`),
	} {
		_, err := Parse([]byte(src), env(map[string]string{"AIRLOCK_CLIENT_ALICE": token}))
		var ke *keyerr.Error
		if err == nil || !(errors.As(err, &ke) && ke.Key == want || strings.Contains(err.Error(), want)) {
			t.Errorf("%s: %v", want, err)
		}
		if err != nil && strings.Contains(err.Error(), token) {
			t.Errorf("%s: the error holds the token", want)
		}
	}
}
