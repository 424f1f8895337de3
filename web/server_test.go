package web_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/storage"
	"github.com/airlockhq/airlock/web"
	"github.com/airlockhq/airlock/web/webtest"
)

// console is a core with one request, b1, which alice may decide.
type console struct {
	decided []web.Decision
	edited  []web.Edit
}

func (c *console) Inbox(context.Context, web.Who) ([]web.Entry, error) { return nil, nil }

func (c *console) Approval(_ context.Context, id string, p web.Who) (web.Approval, error) {
	if id != "b1" || p.IDs["slack"] != "UALICE" {
		return web.Approval{}, confirm.ErrNotFound
	}
	return web.Approval{Platform: "slack", MayDecide: true, Card: card.Card{BatchID: "b1", Calls: []card.Call{{
		Ref: confirm.Ref("b1", 0), Number: 1, Tool: "deploy", Flagged: true, Approvals: 1,
		Summary: `deploy <script>alert(1)</script>`, Args: `{"service": "<img src=x onerror=alert(1)>"}`,
		State: card.State{Kind: card.Waiting}, Editable: true}}}}, nil
}

func (c *console) RunPage(_ context.Context, id string, p web.Who) (web.Run, error) {
	if id != "r1" || p.IDs["slack"] != "UALICE" {
		return web.Run{}, confirm.ErrNotFound
	}
	return web.Run{Run: card.Run{ID: "r1", Runbook: "restart", RequestedBy: "UALICE", Status: confirm.RunbookRunning,
		Steps: []card.RunStep{{ID: "restart", Tool: "restart", State: "needs approval <b>x</b>"}}}, Requests: map[string]string{"restart": "b1"}}, nil
}

func (c *console) DecideOnPage(_ context.Context, _ web.Who, d web.Decision) error {
	c.decided = append(c.decided, d)
	return nil
}

// EditPage: alice's form for call 1 of b1, whose arguments are hostile.
func (c *console) EditPage(_ context.Context, p web.Who, ref string, _ confirm.Assurance) (web.EditPage, error) {
	if ref != confirm.Ref("b1", 0) || p.IDs["slack"] != "UALICE" {
		return web.EditPage{}, errors.New("you can't allow this call")
	}
	return web.EditPage{Ref: ref, Form: card.EditForm(1, "deploy", "deploy <script>alert(1)</script>", `{"service": "</textarea><img src=x onerror=alert(1)>"}`, false)}, nil
}

// EditOnPage takes a JSON object, else refuses it as the core does.
func (c *console) EditOnPage(_ context.Context, _ web.Who, e web.Edit) error {
	var v map[string]any
	if json.Unmarshal([]byte(e.Args), &v) != nil {
		return errors.New("edit refused: the arguments must be one JSON object; nothing changed")
	}
	c.edited = append(c.edited, e)
	return nil
}

type rig struct {
	t    *testing.T
	srv  *httptest.Server
	idp  *webtest.Provider
	core *console
	db   *storage.DB
	path string // the SQLite file, for a hand's edit
}

func newRig(t *testing.T) *rig {
	t.Helper()
	path := filepath.Join(t.TempDir(), "airlock.db")
	db, err := storage.Open(context.Background(), storage.DriverSQLite, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	idp := webtest.New("airlock", "client-secret")
	t.Cleanup(idp.Close)
	r := &rig{t: t, idp: idp, core: &console{}, db: db, path: path}
	mux := http.NewServeMux()
	r.srv = httptest.NewServer(mux)
	t.Cleanup(r.srv.Close)
	s, err := web.New(web.Options{Store: db, Audit: db, Console: r.core, Say: func(err error) string { return err.Error() },
		Config: web.Config{BaseURL: r.srv.URL, OIDC: web.OIDC{Issuer: idp.URL, ClientID: "airlock", ClientSecret: "client-secret"},
			People:   []web.Person{{Email: "alice@example.com", Slack: "UALICE"}, {Email: "bob@example.com", Slack: "UBOB"}},
			Auditors: []string{"alice@example.com"}}})
	if err != nil {
		t.Fatal(err)
	}
	mux.Handle("/ui/", s.Handler())
	return r
}

// client is a browser: a cookie jar, following redirects unless told.
func (r *rig) client(follow bool) *http.Client {
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	if !follow {
		c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	}
	return c
}

func get(t *testing.T, c *http.Client, u string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// startLogin runs the sign-in up to the provider's redirect back: the
// callback's URL, not yet visited.
func (r *rig) startLogin(c *http.Client, ret string) string {
	r.t.Helper()
	resp, _ := get(r.t, c, r.srv.URL+"/ui/login?return="+url.QueryEscape(ret))
	if resp.StatusCode != http.StatusFound {
		r.t.Fatalf("login: %d", resp.StatusCode)
	}
	resp, _ = get(r.t, c, resp.Header.Get("Location")) // the provider signs in at once
	if resp.StatusCode != http.StatusFound || !strings.Contains(resp.Header.Get("Location"), "/ui/callback?") {
		r.t.Fatalf("authorize: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	return resp.Header.Get("Location")
}

func sessionOf(c *http.Client, base string) string {
	u, _ := url.Parse(base + "/ui/")
	for _, k := range c.Jar.Cookies(u) {
		if k.Name == "airlock_session" {
			return k.Value
		}
	}
	return ""
}

// A sign-in completes only for the browser that started it, once, with
// the nonce it sent, for a verified email of a known person; the way
// back never leaves the console.
func TestSignInRefusesForgeries(t *testing.T) {
	r := newRig(t)
	r.idp.SignIn("alice@example.com", true, time.Time{})

	// The happy path, asking to come back to another site: back to /ui/.
	c := r.client(false)
	cb := r.startLogin(c, "//evil.example/x")
	resp, _ := get(t, c, cb)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/" || sessionOf(c, r.srv.URL) == "" {
		t.Fatalf("callback: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	// The same callback again (a replay): refused, no new session.
	c2 := r.client(false)
	if resp, _ := get(t, c2, cb); resp.StatusCode != http.StatusForbidden || sessionOf(c2, r.srv.URL) != "" {
		t.Fatalf("a replayed callback: %d", resp.StatusCode)
	}
	// Another browser's callback (a login forced on a victim): refused.
	c3 := r.client(false)
	cb = r.startLogin(r.client(false), "/ui/")
	if resp, _ := get(t, c3, cb); resp.StatusCode != http.StatusForbidden || sessionOf(c3, r.srv.URL) != "" {
		t.Fatalf("another browser's callback: %d", resp.StatusCode)
	}
	// An ID token made for another sign-in (its nonce): refused.
	c4 := r.client(false)
	cb = r.startLogin(c4, "/ui/")
	r.idp.Nonce = "another-sign-in"
	if resp, _ := get(t, c4, cb); resp.StatusCode != http.StatusForbidden || sessionOf(c4, r.srv.URL) != "" {
		t.Fatalf("another sign-in's token: %d", resp.StatusCode)
	}
	// An unverified email, and an email nobody configured: refused.
	for _, tc := range []struct {
		email    string
		verified bool
	}{{"alice@example.com", false}, {"mallory@example.com", true}} {
		r.idp.SignIn(tc.email, tc.verified, time.Time{})
		c := r.client(false)
		cb := r.startLogin(c, "/ui/")
		if resp, _ := get(t, c, cb); resp.StatusCode != http.StatusForbidden || sessionOf(c, r.srv.URL) != "" {
			t.Fatalf("%s (verified %v): %d", tc.email, tc.verified, resp.StatusCode)
		}
	}
}

// Without a session a page sends the person to sign in and back; a form
// posted without one changes nothing.
func TestPagesNeedASession(t *testing.T) {
	r := newRig(t)
	c := r.client(false)
	resp, _ := get(t, c, r.srv.URL+"/ui/approvals/b1")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/login?return=%2Fui%2Fapprovals%2Fb1" {
		t.Fatalf("no session: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	form := url.Values{"ref": {confirm.Ref("b1", 0)}, "action": {"allow"}}
	req, _ := http.NewRequest(http.MethodPost, r.srv.URL+"/ui/approvals/b1", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || len(r.core.decided) != 0 {
		t.Fatalf("a post without a session: %d, decided %v", resp.StatusCode, r.core.decided)
	}
	// A cookie that is no session's is none.
	u, _ := url.Parse(r.srv.URL + "/ui/")
	c.Jar.SetCookies(u, []*http.Cookie{{Name: "airlock_session", Value: "forged"}})
	if resp, _ := get(t, c, r.srv.URL+"/ui/"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("a forged cookie: %d", resp.StatusCode)
	}
}

// Text from outside Airlock is shown, never run: the page holds no
// markup made of it, and no script runs on it but the console's own file.
func TestApprovalPageIsInert(t *testing.T) {
	r := newRig(t)
	r.idp.SignIn("alice@example.com", true, time.Time{})
	c := r.client(true)
	resp, page := get(t, c, r.srv.URL+"/ui/approvals/b1")
	if resp.StatusCode != 200 {
		t.Fatalf("page: %d\n%s", resp.StatusCode, page)
	}
	if strings.Count(page, "<script") != 1 || !strings.Contains(page, `<script src="/ui/static/console.js" defer></script>`) ||
		strings.Contains(page, "<img") || !strings.Contains(page, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Fatalf("the page runs or hides outside text:\n%s", page)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "script-src 'self';") ||
		strings.Contains(csp, "unsafe") {
		t.Fatalf("CSP %q", csp)
	}
	if resp, _ := get(t, c, r.srv.URL+"/ui/approvals/b2"); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("another request: %d", resp.StatusCode)
	}
}

// The audit page is the auditors': it lists the rows the filters select,
// verifies the chain on demand (and says so when a row was edited by
// hand), and exports the rows; anyone else gets 404, page and export.
func TestAuditPageIsTheAuditors(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	for _, tool := range []string{"deploy", "status", "deploy"} {
		if err := r.db.Audit(ctx, confirm.AuditEvent{Kind: confirm.AuditToolCall, Tool: tool, Actor: "UBOB", Detail: `{"args":"<b>x</b>"}`}); err != nil {
			t.Fatal(err)
		}
	}
	r.idp.SignIn("bob@example.com", true, time.Time{})
	bob := r.client(true)
	for _, p := range []string{"/ui/audit", "/ui/audit/export"} {
		if resp, _ := get(t, bob, r.srv.URL+p); resp.StatusCode != http.StatusNotFound {
			t.Fatalf("bob's %s: %d", p, resp.StatusCode)
		}
	}
	r.idp.SignIn("alice@example.com", true, time.Time{})
	alice := r.client(true)
	resp, page := get(t, alice, r.srv.URL+"/ui/audit?tool=deploy")
	if resp.StatusCode != 200 || strings.Count(page, "<code>deploy</code>") != 2 || strings.Contains(page, "<code>status</code>") || strings.Contains(page, "<b>x</b>") {
		t.Fatalf("alice's audit page: %d\n%s", resp.StatusCode, page)
	}
	if _, page := get(t, alice, r.srv.URL+"/ui/audit?verify=1"); !strings.Contains(page, `id="verified"`) {
		t.Fatalf("verification:\n%s", page)
	}
	_, export := get(t, alice, r.srv.URL+"/ui/audit/export?tool=deploy")
	if n := strings.Count(strings.TrimSpace(export), "\n") + 1; n != 2 || !strings.Contains(export, `"kind":"tool_call"`) {
		t.Fatalf("export of %d lines:\n%s", n, export)
	}
	if resp, page := get(t, alice, r.srv.URL+"/ui/audit?since=yesterday"); resp.StatusCode != 400 || !strings.Contains(page, "since: a date") {
		t.Fatalf("a bad filter: %d", resp.StatusCode)
	}
	for q, key := range map[string]string{"until=tomorrow": "until: a date", "client=a/b": "client: a gateway client"} {
		if resp, page := get(t, alice, r.srv.URL+"/ui/audit?"+q); resp.StatusCode != 400 || !strings.Contains(page, key) {
			t.Fatalf("%s: %d", q, resp.StatusCode)
		}
	}
	// By client: the rows of its sessions (of the approval API and MCP).
	for _, th := range []string{"gateway/claude-code/s1", "mcp/claude-code/s2", "gateway/codex/s3"} {
		c, err := r.db.Conversation(ctx, "gateway", "claude-code", th, false)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.db.Audit(ctx, confirm.AuditEvent{Kind: confirm.AuditToolCall, ConversationID: c.ID, Tool: "client-" + th[:3], Actor: "UBOB"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, page := get(t, alice, r.srv.URL+"/ui/audit?client=claude-code&until=2999-01-01"); strings.Count(page, "<code>client-gat</code>") != 1 ||
		strings.Count(page, "<code>client-mcp</code>") != 1 || strings.Contains(page, "<code>deploy</code>") {
		t.Fatalf("claude-code's rows:\n%s", page)
	}
	hand, err := sql.Open("sqlite3", "file:"+r.path+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	defer hand.Close()
	for _, q := range []string{`DROP TRIGGER audit_no_update`, `UPDATE audit SET detail = '{}' WHERE tool = 'status'`} {
		if _, err := hand.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if _, page := get(t, alice, r.srv.URL+"/ui/audit?verify=1"); !strings.Contains(page, `id="verify-failed"`) {
		t.Fatalf("a row edited by hand verifies:\n%s", page)
	}
}

// A run's page lists its steps with links to their requests; text from
// outside Airlock stays text; anyone else gets 404.
func TestRunPage(t *testing.T) {
	r := newRig(t)
	r.idp.SignIn("alice@example.com", true, time.Time{})
	alice := r.client(true)
	resp, page := get(t, alice, r.srv.URL+"/ui/runs/r1")
	if resp.StatusCode != 200 || !strings.Contains(page, `href="/ui/approvals/b1"`) || strings.Contains(page, "<b>x</b>") {
		t.Fatalf("the run page: %d\n%s", resp.StatusCode, page)
	}
	if resp, _ := get(t, alice, r.srv.URL+"/ui/runs/r2"); resp.StatusCode != 404 {
		t.Fatalf("another run: %d", resp.StatusCode)
	}
}

// Edit… on the page: its form shows the call's arguments as text; a
// refusal shows the form again with what was typed and why, and changes
// nothing; a form without the page's token, or for another request's
// call, is refused; a good edit goes to the core with the session's
// assurance and back to the request's page.
func TestEditOnThePage(t *testing.T) {
	r := newRig(t)
	r.idp.SignIn("alice@example.com", true, time.Time{})
	c := r.client(true)
	ref := confirm.Ref("b1", 0)
	_, page := get(t, c, r.srv.URL+"/ui/approvals/b1")
	if !strings.Contains(page, `href="/ui/approvals/b1/edit?ref=`+url.QueryEscape(ref)+`"`) && !strings.Contains(page, `href="/ui/approvals/b1/edit?ref=`+ref+`"`) {
		t.Fatalf("no Edit… on the page:\n%s", page)
	}
	resp, form := get(t, c, r.srv.URL+"/ui/approvals/b1/edit?ref="+url.QueryEscape(ref))
	if resp.StatusCode != 200 || strings.Contains(form, "<img") || !strings.Contains(form, "&lt;/textarea&gt;&lt;img") || !strings.Contains(form, "Allow edited") {
		t.Fatalf("the edit form: %d\n%s", resp.StatusCode, form)
	}
	csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(form)[1]
	post := func(v url.Values, site string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, r.srv.URL+"/ui/approvals/b1/edit", strings.NewReader(v.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", site)
		nc := *c
		nc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		resp, err := nc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, page := post(url.Values{"csrf": {csrf}, "ref": {ref}, "args": {`{"service": <b>`}}, "same-origin"); code != 422 ||
		!strings.Contains(page, "one JSON object") || !strings.Contains(page, `{&#34;service&#34;: &lt;b&gt;`) {
		t.Fatalf("a refused edit: %d\n%s", code, page)
	}
	if code, _ := post(url.Values{"ref": {ref}, "args": {`{"service":"web"}`}}, "same-origin"); code != 403 {
		t.Fatalf("an edit without the page's token: %d", code)
	}
	if code, _ := post(url.Values{"csrf": {csrf}, "ref": {ref}, "args": {`{"service":"web"}`}}, "cross-site"); code != 403 {
		t.Fatalf("a cross-site edit: %d", code)
	}
	if code, _ := post(url.Values{"csrf": {csrf}, "ref": {confirm.Ref("b2", 0)}, "args": {`{"service":"web"}`}}, "same-origin"); code != 404 {
		t.Fatalf("another request's call: %d", code)
	}
	if len(r.core.edited) != 0 {
		t.Fatalf("refused edits reached the core: %+v", r.core.edited)
	}
	if code, _ := post(url.Values{"csrf": {csrf}, "ref": {ref}, "args": {`{"service":"web"}`}}, "same-origin"); code != 303 {
		t.Fatalf("a good edit: %d", code)
	}
	if len(r.core.edited) != 1 || r.core.edited[0].Args != `{"service":"web"}` || r.core.edited[0].Assurance != confirm.AssuranceSSO {
		t.Fatalf("the core got %+v", r.core.edited)
	}
}
