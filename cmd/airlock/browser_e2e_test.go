package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/airlockhq/airlock/adapters/slack"
	"github.com/airlockhq/airlock/model/modeltest"
	"github.com/airlockhq/airlock/web/webtest"
)

// chromium is Debian's Chromium, which .ci/run installs. Without it the
// browser tests skip, except in CI, where that is a failure.
func chromium(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is not installed (.ci/run installs it)")
	}
	t.Skip("chromium is not installed")
	return ""
}

// browserCtx is a headless Chromium driven over the DevTools protocol,
// with the flags this machine's closed network needs.
func browserCtx(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.WindowSize(1200, 900),
	)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx)
	ctx, cancelT := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(func() { cancelT(); cancelC(); cancelA() })
	return ctx
}

// screenshot saves the page: into $AIRLOCK_SCREENSHOTS (the README's
// pictures, docs/screenshots) when set, else the test's own folder.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	dir := os.Getenv("AIRLOCK_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestConsoleInChromium drives the console in real Chromium against a
// real `airlock run` (fake Slack, SQLite) and the test provider: signing
// in sends the browser through the provider and back; the inbox lists the
// waiting call; the approval page shows it whole; a form another site
// posts into the console (cross-site) changes nothing; Allow on the page
// runs the tool once. It saves screenshots of the inbox and the page.
func TestConsoleInChromium(t *testing.T) {
	skipShort(t)
	ctx := browserCtx(t)
	api := newSlackAPI(t)
	tools := newToolServer(t)
	model := callingModel(t, modeltest.OpenAIToolCall{ID: "c1", Name: "deploy", Arguments: `{"service":"api","note":"<img src=x onerror=alert(1)>"}`})
	idp := webtest.New("airlock", "client-secret-for-tests")
	defer idp.Close()
	dir := t.TempDir()
	addr := freeAddr(t)
	base := "http://" + addr
	path := writeConfig(t, dir, fmt.Sprintf(`
%s
channels: [{platform: slack, id: COPS, approvers: [UALICE]}]
tools:
%s
web:
  base_url: %s
  oidc: {issuer: %q, client_id: airlock, client_secret: client-secret-for-tests}
  people: [{email: alice@example.com, slack: UALICE}]
`, slackRunHead(addr, "sqlite", dir+"/airlock.db", model.BaseURL(), api.URL+"/api/"), deployToolYAML(tools.URL, "service", "note"), base, idp.URL))
	startRun(t, path)
	waitReady(t, addr)
	if code, err := postSigned(addr, mentionBody("EvChrome1", "1800000080.000001", "", "deploy api"), "application/json"); err != nil || code != 200 {
		t.Fatalf("mention: %d %v", code, err)
	}
	waitUntil(t, "the card", func() bool { return len(api.buttons(slack.ActionAllow)) == 1 })
	batch, _, _ := strings.Cut(api.buttons(slack.ActionAllow)[0], ".")

	// Sign in: through the provider and back to the inbox.
	idp.SignIn("alice@example.com", true, time.Time{})
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible(chromedp.CSS(`#waiting`))); err != nil {
		t.Fatalf("sign in: %v", err)
	}
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	inbox, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#waiting`)))
	if err != nil {
		t.Fatal(err)
	}
	if loc != base+"/ui/" || !strings.Contains(inbox, batch) || !strings.Contains(inbox, "deploy") {
		t.Fatalf("the inbox at %s: %q", loc, inbox)
	}
	screenshot(t, ctx, "console-inbox.png")

	// The approval page: the call whole, its hostile argument shown as text.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`a[href="/ui/approvals/`+batch+`"]`)), chromedp.WaitVisible(chromedp.CSS(`section.call`))); err != nil {
		t.Fatalf("the approval page: %v", err)
	}
	args, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`pre.args`)))
	if err != nil {
		t.Fatal(err)
	}
	imgs, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("main img").length`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(args, `<img src=x onerror=alert(1)>`) || imgs != 0 {
		t.Fatalf("arguments %q, %d images on the page", args, imgs)
	}
	screenshot(t, ctx, "console-approval.png")

	// Another site's form posting an Allow into the console: refused.
	refAttr, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS(`input[name="ref"]`), "value"))
	if err != nil {
		t.Fatal(err)
	}
	refTag := refAttr.Value
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!doctype html><form id="f" method="post" action="%s/ui/approvals/%s">
<input name="ref" value="%s"><input name="action" value="allow"></form><script>document.getElementById("f").submit()</script>`, base, batch, refTag)
	}))
	defer evil.Close()
	if err := chromedp.Do(ctx, chromedp.Navigate(evil.URL), chromedp.Sleep(time.Second)); err != nil {
		t.Fatalf("the other site: %v", err)
	}
	forged, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`body`)))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if n := tools.countPrefix("/deploy/"); n != 0 {
		t.Fatalf("a cross-site form allowed the call (%d runs); the page said %q", n, forged)
	}

	// Allow on the page: the tool runs once, and the page says so.
	if err := chromedp.Do(ctx,
		chromedp.Navigate(base+"/ui/approvals/"+batch),
		chromedp.WaitVisible(chromedp.CSS(`button.allow`)),
		chromedp.Click(chromedp.CSS(`button.allow`)),
		chromedp.WaitNotPresent(chromedp.CSS(`button.allow`)),
	); err != nil {
		t.Fatalf("allow: %v", err)
	}
	status, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`p.status`)))
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the deploy", func() bool { return tools.count("/deploy/api") == 1 })
	if !strings.Contains(status, "UALICE") {
		t.Fatalf("the page after Allow: %q", status)
	}
	if n := tools.countPrefix("/deploy/"); n != 1 {
		t.Fatalf("deploy ran %d times", n)
	}
}
