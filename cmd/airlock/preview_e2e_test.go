package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/airlockhq/airlock/adapters/slack/slacktest"
	"github.com/airlockhq/airlock/model/modeltest"
)

const planToken = "plan-token-5ecret-e2e"

// planServer is a dry-run service: each plan answers with hostile text,
// the bearer token it was sent (a secret from ${PLAN_TOKEN}) and the
// change; with changing set, every plan after the first plans more.
type planServer struct {
	*httptest.Server
	plans    atomic.Int64
	changing atomic.Bool
	long     atomic.Bool // a plan longer than the card shows
}

func newPlanServer(t *testing.T) *planServer {
	ps := &planServer{}
	ps.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := ps.plans.Add(1)
		replicas := 20
		if ps.changing.Load() && n > 1 {
			replicas = 30
		}
		fmt.Fprintf(w, "plan for %s <!channel> @everyone <@UMALLORY>\n```\n%s\n+  replicas: %d\n", r.URL.Path, r.Header.Get("Authorization"), replicas)
		if ps.long.Load() {
			for i := range 200 {
				fmt.Fprintf(w, "+  line %d of a long plan\n", i)
			}
		}
	}))
	t.Cleanup(ps.Close)
	return ps
}

// previewRun starts `airlock run` (Slack HTTP, SQLite) with a deploy tool
// whose preview plans with the plan server, and mentions it once.
func previewRun(t *testing.T, recheck bool, long ...bool) (*slackAPI, *toolServer, *planServer, string) {
	t.Helper()
	api := newSlackAPI(t)
	tools := newToolServer(t)
	plans := newPlanServer(t)
	plans.long.Store(len(long) > 0 && long[0])
	model := callingModel(t, modeltest.OpenAIToolCall{ID: "c1", Name: "deploy", Arguments: `{"service":"api"}`})
	dir := t.TempDir()
	addr := freeAddr(t)
	path := writeConfig(t, dir, fmt.Sprintf(`
%s
channels: [{platform: slack, id: COPS, approvers: [UALICE]}]
tools:
%s
    preview:
      http: {method: GET, url: "%s/plan/{{.service}}", headers: {Authorization: "Bearer ${PLAN_TOKEN}"}, timeout: 10s}
      recheck: %v
`, slackRunHead(addr, "sqlite", dir+"/airlock.db", model.BaseURL(), api.URL+"/api/"), deployToolYAML(tools.URL, "service"), plans.URL, recheck))
	startRun(t, path, "PLAN_TOKEN="+planToken)
	waitReady(t, addr)
	if code, err := postSigned(addr, mentionBody("EvPv1", "1800000050.000001", "", "deploy api"), "application/json"); err != nil || code != 200 {
		t.Fatalf("mention: %d %v", code, err)
	}
	return api, tools, plans, addr
}

// landed waits for the card's update showing the preview and returns its
// blocks and its Allow button's value.
func landed(t *testing.T, api *slackAPI) (blocks, allow string) {
	t.Helper()
	waitUntil(t, "the card updated with the preview", func() bool {
		for _, u := range api.updates() {
			if strings.Contains(u.Get("blocks"), "Preview (dry run)") {
				blocks = u.Get("blocks")
				return true
			}
		}
		return false
	})
	var v any
	if err := json.Unmarshal([]byte(blocks), &v); err != nil {
		t.Fatal(err)
	}
	slacktest.Buttons(v, func(id, value string) {
		if id == "airlock_allow" {
			allow = value
		}
	})
	return blocks, allow
}

// TestPreviewOverSlack: the card is posted saying "Preview running…" and
// updated with the plan, scrubbed of the token and inert; a click on the
// card as first posted changes nothing; Allow on the updated card runs the
// deploy once, and the recheck (same plan) lets it.
func TestPreviewOverSlack(t *testing.T) {
	skipShort(t)
	api, tools, plans, addr := previewRun(t, true)
	waitUntil(t, "the card", func() bool { return len(api.buttons("airlock_allow")) == 1 })
	first := api.buttons("airlock_allow")[0]
	if !strings.Contains(api.posts()[0].Get("blocks"), "Preview running") {
		t.Errorf("the card was not posted saying the preview runs: %s", api.posts()[0].Get("blocks"))
	}
	blocks, allow := landed(t, api)
	if strings.Contains(blocks, planToken) || !strings.Contains(blocks, "+  replicas: 20") {
		t.Fatalf("preview on the card (token must be scrubbed): %s", blocks)
	}
	if !strings.Contains(blocks, `"type":"rich_text_preformatted","elements":[{"type":"text","text":"plan for /plan/api \u003c!channel\u003e`) &&
		!strings.Contains(blocks, `"type":"rich_text_preformatted","elements":[{"type":"text","text":"plan for /plan/api <!channel>`) {
		t.Errorf("the plan is not literal preformatted text: %s", blocks)
	}
	if allow == "" || allow == first {
		t.Fatalf("Allow on the updated card %q, first %q: the preview must make a new reference", allow, first)
	}
	at := messagesOf(first)[0]
	press := func(value string) {
		t.Helper()
		if code, err := postSigned(addr, actionBodyOn(at, "UALICE", "airlock_allow", value), "application/x-www-form-urlencoded"); err != nil || code != 200 {
			t.Fatalf("click: %d %v", code, err)
		}
	}
	press(first)
	waitUntil(t, "alice told the preview arrived", api.told("UALICE", "preview arrived since you looked"))
	if n := tools.countPrefix("/deploy/"); n != 0 {
		t.Fatalf("a click on the card before its preview ran the deploy (%d)", n)
	}
	press(allow)
	waitUntil(t, "the deploy", func() bool { return tools.countPrefix("/deploy/") == 1 })
	waitUntil(t, "the model continues", func() bool { return strings.Contains(strings.Join(api.texts(), "\n"), "model saw:") })
	if n := plans.plans.Load(); n != 2 {
		t.Errorf("%d plans, want 2 (the card's and the recheck)", n)
	}
}

// TestPreviewRecheckOverSlack: the plan changes between the card and the
// run: the deploy is not run (the service counts 0), the card says the
// preview changed, and the model is told.
func TestPreviewRecheckOverSlack(t *testing.T) {
	skipShort(t)
	api, tools, plans, addr := previewRun(t, true)
	plans.changing.Store(true)
	waitUntil(t, "the card", func() bool { return len(api.buttons("airlock_allow")) == 1 })
	at := messagesOf(api.buttons("airlock_allow")[0])[0]
	_, allow := landed(t, api)
	if code, err := postSigned(addr, actionBodyOn(at, "UALICE", "airlock_allow", allow), "application/x-www-form-urlencoded"); err != nil || code != 200 {
		t.Fatalf("click: %d %v", code, err)
	}
	waitUntil(t, "the model continues", func() bool { return strings.Contains(strings.Join(api.texts(), "\n"), "model saw:") })
	if said := strings.Join(api.texts(), "\n"); !strings.Contains(said, "the preview changed since it was approved") {
		t.Fatalf("the model was not told the preview changed: %s", said)
	}
	if n := tools.countPrefix("/deploy/"); n != 0 {
		t.Fatalf("the deploy ran %d times after its preview changed", n)
	}
	waitUntil(t, "the card says the preview changed", func() bool {
		us := api.updates()
		return len(us) > 0 && strings.Contains(us[len(us)-1].Get("blocks"), "The preview changed since it was approved (approved ")
	})
}

// TestPreviewInTheTerminal drives a real `airlock chat`: a deploy whose
// preview is a command (no shell for the arguments: they are argv). The
// card says the preview runs, then prints it; /preview 1 prints it whole;
// /allow 1 runs the deploy once. A second deploy's preview changes each
// time it runs: with recheck the run is refused, the service counts no
// deploy of it, and the model is told.
func TestPreviewInTheTerminal(t *testing.T) {
	skipShort(t)
	tools := newToolServer(t)
	dir := t.TempDir()
	model := callingModel(t, modeltest.OpenAIToolCall{ID: "c1", Name: "deploy", Arguments: `{"service":"api; rm -rf / $(id)"}`})
	counter := dir + "/plans"
	path := writeConfig(t, dir, fmt.Sprintf(`
storage: {driver: sqlite, dsn: %q}
model: {provider: openai, name: fake, api_key: sk-test, base_url: %q}
channels: [{platform: shell, id: "*", approvers: [local]}]
tools:
%s
    preview:
      exec: {command: [sh, -c, 'n=$(cat "$1" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$1"; echo "plan for [$0]"; echo "+  replicas: $((20 + $2 * n))"', "{{.service}}", %q, "${PLAN_STEP}"]}
      recheck: true
`, dir+"/airlock.db", model.BaseURL(), deployToolYAML(tools.URL, "service"), counter))

	p := startChatWith(t, airlockBinary(t), path, "PLAN_STEP=0")
	p.send("deploy api")
	p.waitFor("Preview running…")
	p.waitFor("plan for [api; rm -rf / $(id)]")
	p.waitFor("+  replicas: 20")
	p.send("/preview 1")
	p.waitFor("Preview of call 1, deploy")
	p.send("/allow 1")
	p.waitFor("model saw:")
	if n := tools.countPrefix("/deploy/"); n != 1 {
		t.Fatalf("%d deploys, want 1", n)
	}
	p.send("/quit")

	// The same with a plan that grows each time it runs.
	dir2 := t.TempDir()
	model2 := callingModel(t, modeltest.OpenAIToolCall{ID: "c1", Name: "deploy", Arguments: `{"service":"web"}`})
	path2 := writeConfig(t, dir2, strings.Replace(strings.Replace(readFile(t, path), model.BaseURL(), model2.BaseURL(), 1), dir, dir2, -1))
	before := tools.countPrefix("/deploy/")
	p2 := startChatWith(t, airlockBinary(t), path2, "PLAN_STEP=5")
	p2.send("deploy web")
	p2.waitFor("+  replicas: 25")
	p2.send("/allow 1")
	p2.waitFor("model saw: Error: Not executed: the preview changed since it was approved")
	if n := tools.countPrefix("/deploy/") - before; n != 0 {
		t.Fatalf("the deploy ran %d times after its preview changed", n)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestShowFullPreviewOverSlack: a plan longer than the card holds is cut
// with "Show full preview" (action_id airlock_preview, the call's
// reference); a press from a message that is not the card opens nothing;
// one on the card opens a modal holding the whole plan, scrubbed.
func TestShowFullPreviewOverSlack(t *testing.T) {
	skipShort(t)
	api, tools, _, addr := previewRun(t, false, true)
	waitUntil(t, "the card", func() bool { return len(api.buttons("airlock_allow")) == 1 })
	at := messagesOf(api.buttons("airlock_allow")[0])[0]
	blocks, _ := landed(t, api)
	var v any
	if err := json.Unmarshal([]byte(blocks), &v); err != nil {
		t.Fatal(err)
	}
	var show string
	slacktest.Buttons(v, func(id, value string) {
		if id == "airlock_preview" {
			show = value
		}
	})
	if show == "" || !strings.Contains(blocks, "Show full preview shows it all.") {
		t.Fatalf("no Show full preview on a cut plan: %s", blocks)
	}
	elsewhere := posted{at.channel, "1900000099.000009", at.thread}
	if code, err := postSigned(addr, actionBodyOn(elsewhere, "UALICE", "airlock_preview", show), "application/x-www-form-urlencoded"); err != nil || code != 200 {
		t.Fatalf("click: %d %v", code, err)
	}
	waitUntil(t, "the press from elsewhere is answered", func() bool { return len(api.ephemerals("UALICE")) > 0 })
	if n := len(api.callsTo("views.open")); n != 0 {
		t.Fatalf("a press from another message opened %d views", n)
	}
	if code, err := postSigned(addr, actionBodyOn(at, "UALICE", "airlock_preview", show), "application/x-www-form-urlencoded"); err != nil || code != 200 {
		t.Fatalf("click: %d %v", code, err)
	}
	waitUntil(t, "views.open", func() bool { return len(api.callsTo("views.open")) == 1 })
	view := api.callsTo("views.open")[0].Get("view")
	if !strings.Contains(view, "line 199 of a long plan") || strings.Contains(view, planToken) || !strings.Contains(view, "airlock_preview") {
		t.Fatalf("the modal does not hold the whole scrubbed plan: %.400s", view)
	}
	if n := tools.countPrefix("/deploy/"); n != 0 {
		t.Fatal("showing the preview ran something")
	}
}
