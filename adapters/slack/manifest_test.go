package slack

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"go.yaml.in/yaml/v3"
)

// manifest is what the tests read of slack-app-manifest.yaml.
type manifest struct {
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

func readManifest(t *testing.T) manifest {
	t.Helper()
	data, err := os.ReadFile("../../slack-app-manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var m manifest
	if err := yaml.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// The manifest in the repo asks for what the adapter uses.
func TestAppManifest(t *testing.T) {
	m := readManifest(t)
	if m.DisplayInformation.Name != "Airlock" {
		t.Errorf("name %q", m.DisplayInformation.Name)
	}
	for _, s := range []string{"app_mentions:read", "chat:write", "im:history", "im:write", "mpim:history", "channels:history", "groups:history", "usergroups:read"} {
		if !slices.Contains(m.OAuth.Scopes.Bot, s) {
			t.Errorf("scope %s missing", s)
		}
	}
	// Nothing reads conversation or user details.
	for _, s := range []string{"im:read", "users:read", "mpim:read", "channels:read", "groups:read"} {
		if slices.Contains(m.OAuth.Scopes.Bot, s) {
			t.Errorf("scope %s asked for but not used", s)
		}
	}
	for _, e := range []string{"app_mention", "message.im", "message.mpim", "message.channels", "message.groups"} {
		if !slices.Contains(m.Settings.Events.BotEvents, e) {
			t.Errorf("bot event %s missing", e)
		}
	}
	if !m.Settings.Interactivity.Enabled || !m.Settings.SocketMode || m.Settings.OrgDeploy {
		t.Errorf("settings: %+v", m.Settings)
	}
}

// clientMethods maps each slack-go call the adapter makes with its bot
// client (a.api) to the Web API method it sends. A call missing here
// fails TestManifestScopesFollowTheCode: add it with its method.
var clientMethods = map[string]string{
	"AuthTestContext":               "auth.test",
	"PostMessageContext":            "chat.postMessage",
	"UpdateMessageContext":          "chat.update",
	"PostEphemeralContext":          "chat.postEphemeral",
	"OpenViewContext":               "views.open",
	"GetUserGroupMembersContext":    "usergroups.users.list",
	"GetPermalinkContext":           "chat.getPermalink",
	"OpenConversationContext":       "conversations.open",
	"GetConversationRepliesContext": "conversations.replies",
	"GetConversationHistoryContext": "conversations.history",
	"PublishViewContext":            "views.publish",
	// The client handed to Socket Mode, which opens its connection with
	// the app-level token.
	"socketmode.New": "apps.connections.open",
}

// methodScopes are the bot scopes each Web API method needs
// (https://api.slack.com/methods). apps.connections.open takes the
// app-level token (connections:write), not a bot scope.
var methodScopes = map[string][]string{
	"auth.test":             nil,
	"chat.postMessage":      {"chat:write"},
	"chat.update":           {"chat:write"},
	"chat.postEphemeral":    {"chat:write"},
	"views.open":            nil,
	"usergroups.users.list": {"usergroups:read"},
	"chat.getPermalink":     nil,          // links between a card, its thread and its pointer
	"conversations.open":    {"im:write"}, // DM copies of cards (notify: [dm])
	// Recovery finds a card posted but never recorded in its thread.
	"conversations.replies": {"channels:history", "groups:history", "im:history", "mpim:history"},
	// ... and in an approvals channel or a DM (a DM copy).
	"conversations.history": {"channels:history", "groups:history", "im:history", "mpim:history"},
	"apps.connections.open": nil,
	"views.publish":         nil, // the Home tab
}

// eventScopes are the scopes each subscribed bot event needs.
var eventScopes = map[string][]string{
	"app_home_opened":  nil,
	"app_mention":      {"app_mentions:read"},
	"message.im":       {"im:history"},
	"message.mpim":     {"mpim:history"},
	"message.channels": {"channels:history"},
	"message.groups":   {"groups:history"},
}

// adapterClientCalls lists, from the package's non-test source, every
// method called on the bot client (x.api.Method(...)) and every function
// the client is handed to (pkg.Func(x.api, ...)), by go/ast.
func adapterClientCalls(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	isClient := func(e ast.Expr) bool {
		sel, ok := e.(*ast.SelectorExpr)
		return ok && sel.Sel.Name == "api"
	}
	seen := map[string]bool{}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			if fn, ok := call.Fun.(*ast.SelectorExpr); ok && isClient(fn.X) {
				seen[fn.Sel.Name] = true
			}
			for _, arg := range call.Args {
				if !isClient(arg) {
					continue
				}
				callee := "?"
				if fn, ok := call.Fun.(*ast.SelectorExpr); ok {
					if pkg, ok := fn.X.(*ast.Ident); ok {
						callee = pkg.Name + "." + fn.Sel.Name
					} else {
						callee = fn.Sel.Name
					}
				} else if id, ok := call.Fun.(*ast.Ident); ok {
					callee = id.Name
				}
				seen[callee] = true
			}
			return true
		})
	}
	return slices.Sorted(maps.Keys(seen))
}

// TestManifestScopesFollowTheCode: the manifest's bot scopes are exactly
// the scopes of the Web API methods the adapter's source calls plus those
// of the events it subscribes to; every subscribed event is one the
// adapter handles.
func TestManifestScopesFollowTheCode(t *testing.T) {
	m := readManifest(t)
	calls := adapterClientCalls(t)
	if len(calls) < 5 {
		t.Fatalf("found only %v: is the client still the api field?", calls)
	}
	want := map[string]bool{}
	for _, c := range calls {
		method, ok := clientMethods[c]
		if !ok {
			t.Errorf("the adapter calls %s on its Slack client: add it to clientMethods with its Web API method, and that method's scopes to methodScopes", c)
			continue
		}
		scopes, ok := methodScopes[method]
		if !ok {
			t.Errorf("no scopes listed for %s", method)
		}
		for _, s := range scopes {
			want[s] = true
		}
	}
	for _, e := range m.Settings.Events.BotEvents {
		scopes, ok := eventScopes[e]
		if !ok {
			t.Errorf("the manifest subscribes to %s, which the adapter does not handle", e)
		}
		for _, s := range scopes {
			want[s] = true
		}
	}
	if !slices.Equal(slices.Sorted(slices.Values(m.Settings.Events.BotEvents)), slices.Sorted(maps.Keys(eventScopes))) {
		t.Errorf("bot events %v, want %v", m.Settings.Events.BotEvents, slices.Sorted(maps.Keys(eventScopes)))
	}
	got := slices.Clone(m.OAuth.Scopes.Bot)
	sort.Strings(got)
	if !slices.Equal(got, slices.Compact(slices.Clone(got))) {
		t.Errorf("a scope is listed twice: %v", got)
	}
	if exp := slices.Sorted(maps.Keys(want)); !slices.Equal(got, exp) {
		t.Errorf("manifest bot scopes %v, want exactly %v (methods %v)", got, exp, calls)
	}
}

// seenMethods records every Web API method any fake Slack answered in this
// test binary, for TestMain.
var seenMethods sync.Map

// TestMain checks, after a whole run of the package's tests, that every
// Web API method the adapter sent to the fake Slack is one whose scopes
// TestManifestScopesFollowTheCode knows: a call the source scan missed
// (made through another value than a.api, say) fails here.
func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	// Only a whole run calls every method: not with -run, -skip, -short
	// or -list.
	whole := func() bool {
		for _, name := range []string{"test.run", "test.skip", "test.list"} {
			if f := flag.Lookup(name); f != nil && f.Value.String() != "" {
				return false
			}
		}
		return !testing.Short()
	}
	if code == 0 && whole() {
		var missing []string
		n := 0
		seenMethods.Range(func(k, _ any) bool {
			n++
			if _, ok := methodScopes[k.(string)]; !ok {
				missing = append(missing, k.(string))
			}
			return true
		})
		switch {
		case len(missing) > 0:
			sort.Strings(missing)
			fmt.Fprintf(os.Stderr, "FAIL: the adapter called Slack Web API methods without known scopes: %v; add them to methodScopes (and the manifest)\n", missing)
			code = 1
		case n == 0 && flag.Lookup("test.fuzz").Value.String() == "":
			fmt.Fprintln(os.Stderr, "FAIL: no Web API call reached the fake Slack; the method check saw nothing")
			code = 1
		}
	}
	os.Exit(code)
}
