package slack

import (
	"os"
	"slices"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The manifest in the repo asks for what the adapter uses.
func TestAppManifest(t *testing.T) {
	data, err := os.ReadFile("../../slack-app-manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		DisplayInformation struct {
			Name string `yaml:"name"`
		} `yaml:"display_information"`
		OAuth struct {
			Scopes struct {
				Bot []string `yaml:"bot"`
			} `yaml:"scopes"`
		} `yaml:"oauth_config"`
		Settings struct {
			Events struct {
				BotEvents []string `yaml:"bot_events"`
			} `yaml:"event_subscriptions"`
			Interactivity struct {
				Enabled bool `yaml:"is_enabled"`
			} `yaml:"interactivity"`
			OrgDeploy  bool `yaml:"org_deploy_enabled"`
			SocketMode bool `yaml:"socket_mode_enabled"`
		} `yaml:"settings"`
	}
	if err := yaml.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	if m.DisplayInformation.Name != "Airlock" {
		t.Errorf("name %q", m.DisplayInformation.Name)
	}
	for _, s := range []string{"app_mentions:read", "chat:write", "im:history", "im:read", "channels:history", "groups:history", "usergroups:read", "users:read"} {
		if !slices.Contains(m.OAuth.Scopes.Bot, s) {
			t.Errorf("scope %s missing", s)
		}
	}
	for _, e := range []string{"app_mention", "message.im", "message.channels", "message.groups"} {
		if !slices.Contains(m.Settings.Events.BotEvents, e) {
			t.Errorf("bot event %s missing", e)
		}
	}
	if !m.Settings.Interactivity.Enabled || !m.Settings.SocketMode || m.Settings.OrgDeploy {
		t.Errorf("settings: %+v", m.Settings)
	}
}
