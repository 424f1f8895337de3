package main

import (
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/adapters/slack"
	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/model/modeltest"
	"github.com/airlockhq/airlock/web/webtest"
)

// browser is a person's cookie jar against the console; it follows
// redirects, as a browser does.
type browser struct {
	t    *testing.T
	base string
	c    *http.Client
}

func newBrowser(t *testing.T, base string) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, base: base, c: &http.Client{Jar: jar, Timeout: 20 * time.Second}}
}

// get fetches a page: its status and body.
func (b *browser) get(path string) (int, string) {
	b.t.Helper()
	resp, err := b.c.Get(b.base + path)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// post submits a form as the console's own page would (same origin),
// or from origin when given: status and body, redirects not followed.
func (b *browser) post(path string, form url.Values, origin string) (int, string) {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, b.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if origin == "" {
		origin = b.base
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	} else {
		req.Header.Set("Sec-Fetch-Site", "cross-site")
	}
	req.Header.Set("Origin", origin)
	c := *b.c
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// consoleRig is a real `airlock run` (Slack HTTP mode, SQLite) with the
// web console and the test provider: channel COPS, whose approver is
// UALICE; the model calls deploy with args; tools and the rest of the
// config as given; the console on localhost (a domain name, as passkeys
// need) or on 127.0.0.1.
type consoleRig struct {
	api   *slackAPI
	tools *toolServer
	idp   *webtest.Provider
	addr  string
	base  string
	path  string
	dir   string
}

func newConsoleRig(t *testing.T, args string, tools func(url string) string, extra, people string, onDomain bool) *consoleRig {
	t.Helper()
	r := &consoleRig{api: newSlackAPI(t), tools: newToolServer(t), idp: webtest.New("airlock", "client-secret-for-tests"), dir: t.TempDir(), addr: freeAddr(t)}
	t.Cleanup(r.idp.Close)
	model := callingModel(t, modeltest.OpenAIToolCall{ID: "c1", Name: "deploy", Arguments: args})
	r.base = "http://" + r.addr
	if onDomain {
		_, port, _ := strings.Cut(r.addr, ":")
		r.base = "http://localhost:" + port
	}
	r.path = writeConfig(t, r.dir, fmt.Sprintf(`
%s
channels: [{platform: slack, id: COPS, approvers: [UALICE]}]
%s
tools:
%s
web:
  base_url: %s
  oidc: {issuer: %q, client_id: airlock, client_secret: client-secret-for-tests}
  people:
%s
`, slackRunHead(r.addr, "sqlite", r.dir+"/airlock.db", model.BaseURL(), r.api.URL+"/api/"), extra, tools(r.tools.URL), r.base, r.idp.URL, people))
	startRun(t, r.path)
	waitReady(t, r.addr)
	return r
}

// mention asks for a deploy in COPS and returns the new card's reference
// of the button actionID.
func (r *consoleRig) mention(t *testing.T, id, ts, actionID string) string {
	t.Helper()
	n := len(r.api.buttons(actionID))
	if code, err := postSigned(r.addr, mentionBody(id, ts, "", "deploy"), "application/json"); err != nil || code != 200 {
		t.Fatalf("mention: %d %v", code, err)
	}
	waitUntil(t, "the card", func() bool { return len(r.api.buttons(actionID)) == n+1 })
	return r.api.buttons(actionID)[n]
}

const alicePerson = "    - {email: alice@example.com, slack: UALICE}"

var (
	csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
	refField  = regexp.MustCompile(`name="ref" value="([^"]+)"`)
)

func field(t *testing.T, re *regexp.Regexp, page string) string {
	t.Helper()
	m := re.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no %s in the page:\n%s", re, page)
	}
	return m[1]
}

// TestWebConsoleOverSlack drives a real `airlock run` (Slack HTTP mode,
// SQLite) with the console on and a real OpenID Connect sign-in against a
// test provider: a person is sent to sign in and brought back; the
// session cookie is HttpOnly and SameSite=Lax; the approver's inbox lists
// the waiting call and the requester's lists their own request; someone
// who is neither gets 404 for the page and its form; a cross-site POST
// and a POST without the page's token change nothing; the approver's
// Allow on the page runs the tool once and a second Allow is refused;
// signing out ends the session.
func TestWebConsoleOverSlack(t *testing.T) {
	skipShort(t)
	r := newConsoleRig(t, `{"service":"api"}`, func(u string) string { return deployToolYAML(u, "service") }, "",
		alicePerson+"\n    - {email: req@example.com, slack: UREQ}\n    - {email: carol@example.com, slack: UCAROL}", false)
	api, tools, idp, base := r.api, r.tools, r.idp, r.base
	batch, _, _ := strings.Cut(r.mention(t, "EvWeb1", "1800000060.000001", slack.ActionAllow), ".")

	signIn := func(email string) *browser {
		t.Helper()
		b := newBrowser(t, base)
		idp.SignIn(email, true, time.Time{})
		code, page := b.get("/ui/")
		if code != 200 || !strings.Contains(page, email) {
			t.Fatalf("%s signing in: %d\n%s", email, code, page)
		}
		return b
	}

	// Sign-in: the cookie is the browser's only, and not sent cross-site.
	alice := signIn("alice@example.com")
	u, _ := url.Parse(base + "/ui/")
	var session *http.Cookie
	for _, c := range alice.c.Jar.Cookies(u) {
		if c.Name == "airlock_session" {
			session = c
		}
	}
	if session == nil {
		t.Fatal("no session cookie")
	}
	// The flags are on the callback's Set-Cookie, which the jar hides:
	// sign in once more by hand and read it.
	b2 := newBrowser(t, base)
	b2.c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if strings.HasPrefix(req.URL.Path, "/ui/") && req.URL.Path != "/ui/callback" && req.URL.Path != "/ui/login" {
			return http.ErrUseLastResponse
		}
		return nil
	}
	resp, err := b2.c.Get(base + "/ui/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	setCookie := strings.Join(resp.Header.Values("Set-Cookie"), "\n")
	if !strings.Contains(setCookie, "airlock_session=") || !strings.Contains(setCookie, "HttpOnly") || !strings.Contains(setCookie, "SameSite=Lax") {
		t.Fatalf("session cookie: %q", setCookie)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Fatalf("CSP %q", csp)
	}

	// The approver's inbox lists the waiting call; the requester's lists
	// their request; the page shows the call whole.
	if _, page := alice.get("/ui/"); !strings.Contains(page, batch) || !strings.Contains(page, "deploy") {
		t.Fatalf("alice's inbox:\n%s", page)
	}
	req := signIn("req@example.com")
	if _, page := req.get("/ui/"); !strings.Contains(page, "Nothing waits on you") || !strings.Contains(page, batch) {
		t.Fatalf("the requester's inbox:\n%s", page)
	}
	code, page := alice.get("/ui/approvals/" + batch)
	if code != 200 || !strings.Contains(page, `&#34;service&#34;: &#34;api&#34;`) {
		t.Fatalf("the approval page: %d\n%s", code, page)
	}
	csrf, ref := field(t, csrfField, page), field(t, refField, page)

	// Someone who may neither decide nor asked: 404, page and form alike.
	carol := signIn("carol@example.com")
	if code, _ := carol.get("/ui/approvals/" + batch); code != 404 {
		t.Fatalf("carol's view of the page: %d", code)
	}
	_, carolInbox := carol.get("/ui/")
	carolCSRF := field(t, csrfField, carolInbox)
	if code, _ := carol.post("/ui/approvals/"+batch, url.Values{"csrf": {carolCSRF}, "ref": {ref}, "action": {"allow"}}, ""); code != 404 {
		t.Fatalf("carol's allow: %d", code)
	}
	if code, _ := carol.get("/ui/approvals/nosuchbatch"); code != 404 {
		t.Fatalf("no such request: %d", code)
	}

	// Slack's Home tab: alice's lists the waiting call with its links.
	home, _ := json.Marshal(map[string]any{"type": "event_callback", "team_id": "T1", "api_app_id": "A1", "event_id": "EvHome1",
		"event_time": time.Now().Unix(), "event": map[string]any{"type": "app_home_opened", "user": "UALICE", "channel": "D0HOME", "tab": "home", "event_ts": "1800000060.000009"}})
	if code, err := postSigned(r.addr, home, "application/json"); err != nil || code != 200 {
		t.Fatalf("app_home_opened: %d %v", code, err)
	}
	waitUntil(t, "the Home tab", func() bool { return len(api.callsTo("views.publish")) == 1 })
	if pub := api.callsTo("views.publish")[0]; pub.Get("user_id") != "UALICE" || !strings.Contains(pub.Get("view"), "deploy") ||
		!strings.Contains(pub.Get("view"), base+"/ui/approvals/"+batch) {
		t.Fatalf("the Home tab published: %v", pub)
	}

	// Forged requests: cross-site, and without the page's token.
	if code, _ := alice.post("/ui/approvals/"+batch, url.Values{"csrf": {csrf}, "ref": {ref}, "action": {"allow"}}, "http://evil.example"); code != 403 {
		t.Fatalf("a cross-site allow: %d", code)
	}
	if code, _ := alice.post("/ui/approvals/"+batch, url.Values{"ref": {ref}, "action": {"allow"}}, ""); code != 403 {
		t.Fatalf("an allow without the token: %d", code)
	}
	if code, _ := alice.post("/ui/approvals/"+batch, url.Values{"csrf": {carolCSRF}, "ref": {ref}, "action": {"allow"}}, ""); code != 403 {
		t.Fatalf("an allow with another session's token: %d", code)
	}
	// The requester may see the page but not allow their own call.
	_, reqPage := req.get("/ui/approvals/" + batch)
	if code, page := req.post("/ui/approvals/"+batch, url.Values{"csrf": {field(t, csrfField, reqPage)}, "ref": {ref}, "action": {"allow"}}, ""); code != 409 || !strings.Contains(page, "can&#39;t approve") && !strings.Contains(page, "can&#39;t allow") {
		t.Fatalf("the requester's allow: %d\n%s", code, page)
	}
	time.Sleep(200 * time.Millisecond)
	if n := tools.countPrefix("/deploy/"); n != 0 {
		t.Fatalf("deploy ran %d times before the approver's allow", n)
	}

	// The Home tab opened again uses Slack's whole allowance of
	// views.publish for a while: the change the allow makes meets a 429.
	api.fake.Limit("views.publish", 1, 4*time.Second)
	home2, _ := json.Marshal(map[string]any{"type": "event_callback", "team_id": "T1", "api_app_id": "A1", "event_id": "EvHome2",
		"event_time": time.Now().Unix(), "event": map[string]any{"type": "app_home_opened", "user": "UALICE", "channel": "D0HOME", "tab": "home", "event_ts": "1800000060.000010"}})
	if code, err := postSigned(r.addr, home2, "application/json"); err != nil || code != 200 {
		t.Fatalf("app_home_opened again: %d %v", code, err)
	}
	waitUntil(t, "the Home tab again", func() bool { return len(api.callsTo("views.publish")) == 2 })

	// The approver's Allow: the tool runs once; a second is refused.
	if code, _ := alice.post("/ui/approvals/"+batch, url.Values{"csrf": {csrf}, "ref": {ref}, "action": {"allow"}}, ""); code != 303 {
		t.Fatalf("alice's allow: %d", code)
	}
	waitUntil(t, "the deploy", func() bool { return tools.count("/deploy/api") == 1 })
	if code, page := alice.post("/ui/approvals/"+batch, url.Values{"csrf": {csrf}, "ref": {ref}, "action": {"allow"}}, ""); code != 409 || !strings.Contains(page, "already decided") {
		t.Fatalf("a second allow: %d\n%s", code, page)
	}
	// The page's history: the requester's call, the requester's refused
	// allow and why, alice's allow.
	if _, page := alice.get("/ui/approvals/" + batch); !strings.Contains(page, `id="history"`) ||
		!regexp.MustCompile(`<span class="person">@UREQ</span>&#39;s click on call 1, <code>deploy</code> changed nothing: not an approver`).MatchString(page) ||
		!strings.Contains(page, `<span class="person">@UALICE</span> allowed call 1, <code>deploy</code>`) {
		t.Fatalf("the page's history:\n%s", page)
	}
	testkit.Eventually(t, 10*time.Second, "the card updated", func() bool {
		us := api.updates()
		return len(us) > 0 && strings.Contains(us[len(us)-1].Get("blocks"), "UALICE")
	})
	if n := tools.countPrefix("/deploy/"); n != 1 {
		t.Fatalf("deploy ran %d times", n)
	}
	// Alice's Home tab is kept current: published again once Slack's
	// limit lets it, the call no longer waiting on her.
	testkit.Eventually(t, 15*time.Second, "the Home tab kept current", func() bool {
		pubs := api.callsTo("views.publish")
		last := pubs[len(pubs)-1].Get("view")
		return api.fake.Limited("views.publish") > 0 && strings.Contains(last, "Nothing waits on you.") && !strings.Contains(last, base+"/ui/approvals/"+batch+`"`)
	})

	// Signing out ends the session: the next page asks to sign in again.
	if code, _ := alice.post("/ui/logout", url.Values{"csrf": {csrf}}, ""); code != 200 {
		t.Fatalf("sign out: %d", code)
	}
	idp.SignIn("", true, time.Time{})
	if code, _ := alice.get("/ui/"); code != 403 {
		t.Fatalf("after signing out: %d (the provider signs nobody in, so a new sign-in fails)", code)
	}
}

// TestWebStepUpOverSlack drives confirmation.step_up on a real `airlock
// run`: a critical call needs a fresh sign-in. Its Allow… in Slack
// changes nothing and the clicker is sent the page's link; on the page, a
// session signed in ten minutes ago is asked to sign in again, and its
// Allow (posted anyway) changes nothing; after a fresh sign-in a wrong
// phrase changes nothing and the right one runs the call once, audited
// with assurance sso.
func TestWebStepUpOverSlack(t *testing.T) {
	skipShort(t)
	r := newConsoleRig(t, `{"service":"api"}`, criticalDeployYAML, "confirmation: {step_up: {critical: sso}}", alicePerson, false)
	api, tools, idp, base, addr, path := r.api, r.tools, r.idp, r.base, r.addr, r.path
	ref := r.mention(t, "EvStep1", "1800000070.000001", slack.ActionAllowTyped)
	batch, _, _ := strings.Cut(ref, ".")

	// Chat: Allow… changes nothing; the clicker is sent the page.
	if code, err := postSigned(addr, actionBody("UALICE", slack.ActionAllowTyped, ref), "application/x-www-form-urlencoded"); err != nil || code != 200 {
		t.Fatalf("click: %d %v", code, err)
	}
	waitUntil(t, "the link to the page", api.told("UALICE", base+"/ui/approvals/"+batch))
	if n := len(api.callsTo("views.open")); n != 0 {
		t.Fatalf("the phrase form opened (%d) for a call that needs a step-up", n)
	}

	// The page, signed in ten minutes ago: asked to sign in again.
	alice := newBrowser(t, base)
	idp.SignIn("alice@example.com", true, time.Now().Add(-10*time.Minute))
	code, page := alice.get("/ui/approvals/" + batch)
	if code != 200 || !strings.Contains(page, "needs a fresh sign-in") || strings.Contains(page, `value="allow"`) {
		t.Fatalf("a stale session's page: %d\n%s", code, page)
	}
	csrf, callRef := field(t, csrfField, page), field(t, refField, page)
	if code, page := alice.post("/ui/approvals/"+batch, url.Values{"csrf": {csrf}, "ref": {callRef}, "action": {"allow"}, "phrase": {"prod/api"}}, ""); code != 409 || !strings.Contains(page, "fresh sign-in") {
		t.Fatalf("a stale session's allow: %d\n%s", code, page)
	}

	// Edit… with the stale session: the form says saving won't allow the
	// call; the edit is stored and nothing runs.
	code, form := alice.get("/ui/approvals/" + batch + "/edit?ref=" + url.QueryEscape(callRef))
	if code != 200 || !strings.Contains(form, "<strong>a fresh sign-in (within 5 minutes)</strong>: saving the edit does not allow it") || !strings.Contains(form, "Save edit") {
		t.Fatalf("a stale session's edit form: %d\n%s", code, form)
	}
	if code, _ := alice.post("/ui/approvals/"+batch+"/edit", url.Values{"csrf": {csrf}, "ref": {callRef}, "args": {`{"service":"db"}`}}, ""); code != 303 {
		t.Fatalf("a stale session's edit: %d", code)
	}

	// A fresh sign-in: the phrase must be the edited call's.
	idp.SignIn("alice@example.com", true, time.Time{})
	if code, _ := alice.get("/ui/login?fresh=1&return=" + url.QueryEscape("/ui/approvals/"+batch)); code != 200 {
		t.Fatalf("signing in again: %d", code)
	}
	code, page = alice.get("/ui/approvals/" + batch)
	if code != 200 || !strings.Contains(page, `value="allow"`) || !strings.Contains(page, `name="phrase"`) || !strings.Contains(page, `&#34;service&#34;: &#34;db&#34;`) {
		t.Fatalf("a fresh session's page: %d\n%s", code, page)
	}
	csrf, callRef = field(t, csrfField, page), field(t, refField, page)
	if code, _ := alice.post("/ui/approvals/"+batch, url.Values{"csrf": {csrf}, "ref": {callRef}, "action": {"allow"}, "phrase": {"prod/api"}}, ""); code != 409 {
		t.Fatalf("the model's arguments' phrase: %d", code)
	}
	time.Sleep(200 * time.Millisecond)
	if n := tools.countPrefix("/deploy/"); n != 0 {
		t.Fatalf("deploy ran %d times before the step-up allow", n)
	}
	if code, _ := alice.post("/ui/approvals/"+batch, url.Values{"csrf": {csrf}, "ref": {callRef}, "action": {"allow"}, "phrase": {"prod/db"}}, ""); code != 303 {
		t.Fatalf("the step-up allow: %d", code)
	}
	waitUntil(t, "the deploy", func() bool { return tools.count("/deploy/db") == 1 })
	var out, errOut strings.Builder
	if code := run(t.Context(), []string{"audit", "export", "-config", path, "-format", "jsonl"}, nil, &out, &errOut); code != 0 {
		t.Fatalf("audit export: %d %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), `\"assurance\":\"sso\"`) && !strings.Contains(out.String(), `"assurance":"sso"`) {
		t.Fatalf("no decision with assurance sso in the audit:\n%s", out.String())
	}
	if n := tools.countPrefix("/deploy/"); n != 1 {
		t.Fatalf("deploy ran %d times", n)
	}
}

var argsField = regexp.MustCompile(`(?s)<textarea name="args"[^>]*>(.*?)</textarea>`)

// TestWebEditOverSlack drives Edit… on the console's page against a real
// `airlock run`: the form shows the call's arguments; arguments the tool
// does not take, or that are not JSON, are refused on the form (what was
// typed shown again) and nothing runs; a form without the page's token or
// from another site changes nothing; a good edit is the approver's Allow:
// the tool runs once with the edited arguments, the Slack card shows them,
// and the form of the earlier revision changes nothing more.
func TestWebEditOverSlack(t *testing.T) {
	skipShort(t)
	r := newConsoleRig(t, `{"service":"api"}`, func(u string) string { return deployToolYAML(u, "service") }, "", alicePerson, false)
	batch, _, _ := strings.Cut(r.mention(t, "EvEdit1", "1800000110.000001", slack.ActionAllow), ".")
	alice := newBrowser(t, r.base)
	r.idp.SignIn("alice@example.com", true, time.Time{})
	code, page := alice.get("/ui/approvals/" + batch)
	m := regexp.MustCompile(`href="(/ui/approvals/[^"]+/edit\?ref=[^"]+)"`).FindStringSubmatch(page)
	if code != 200 || m == nil {
		t.Fatalf("no Edit… on the page: %d\n%s", code, page)
	}
	code, form := alice.get(html.UnescapeString(m[1]))
	if code != 200 || !strings.Contains(html.UnescapeString(field(t, argsField, form)), `"service": "api"`) {
		t.Fatalf("the edit form: %d\n%s", code, form)
	}
	csrf, ref := field(t, csrfField, form), field(t, refField, form)
	edit := func(args, origin string, token string) (int, string) {
		t.Helper()
		return alice.post("/ui/approvals/"+batch+"/edit", url.Values{"csrf": {token}, "ref": {ref}, "args": {args}}, origin)
	}
	for _, bad := range []string{`{"service": 5}`, `{"service": "web"`} {
		code, page := edit(bad, "", csrf)
		if code != 422 || html.UnescapeString(field(t, argsField, page)) != bad || !strings.Contains(page, `class="refused"`) {
			t.Fatalf("arguments %s: %d\n%s", bad, code, page)
		}
	}
	if code, _ := edit(`{"service":"web"}`, "http://evil.example", csrf); code != 403 {
		t.Fatalf("a cross-site edit: %d", code)
	}
	if code, _ := edit(`{"service":"web"}`, "", "not-the-token"); code != 403 {
		t.Fatalf("an edit without the page's token: %d", code)
	}
	time.Sleep(200 * time.Millisecond)
	if n := r.tools.countPrefix("/deploy/"); n != 0 {
		t.Fatalf("deploy ran %d times before a good edit", n)
	}
	if code, page := edit(`{"service":"web"}`, "", csrf); code != 303 {
		t.Fatalf("a good edit: %d\n%s", code, page)
	}
	waitUntil(t, "the edited deploy", func() bool { return r.tools.count("/deploy/web") == 1 })
	waitUntil(t, "the card showing the edit", func() bool {
		for _, u := range r.api.updates() {
			if all, _ := formatted(t, u.Get("blocks")); strings.Contains(all, "web") && strings.Contains(all, "UALICE") {
				return true
			}
		}
		return false
	})
	if code, _ := edit(`{"service":"db"}`, "", csrf); code != 409 {
		t.Fatalf("the earlier revision's form again: %d", code)
	}
	time.Sleep(200 * time.Millisecond)
	if n, api := r.tools.countPrefix("/deploy/"), r.tools.count("/deploy/api"); n != 1 || api != 0 {
		t.Fatalf("deploy ran %d times (%d with the model's arguments)", n, api)
	}
}
