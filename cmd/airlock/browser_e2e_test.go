package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/webauthn"
	"github.com/chromedp/chromedp"

	"github.com/airlockhq/airlock/adapters/slack"
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
	r := newConsoleRig(t, `{"service":"api","note":"<img src=x onerror=alert(1)>"}`, func(u string) string { return deployToolYAML(u, "service", "note") },
		"", alicePerson+"\n    - {email: carol@example.com, slack: UCAROL}", false)
	tools, idp, base := r.tools, r.idp, r.base
	batch, _, _ := strings.Cut(r.mention(t, "EvChrome1", "1800000080.000001", slack.ActionAllow), ".")

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

	// Signed out, then in as carol, who is no approver of the request:
	// its page is 404, and says nothing of it.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`header form button`)), chromedp.WaitVisible(chromedp.CSS(`p.message`))); err != nil {
		t.Fatalf("sign out: %v", err)
	}
	idp.SignIn("carol@example.com", true, time.Time{})
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/ui/approvals/"+batch), chromedp.WaitVisible(chromedp.CSS(`p.message`))); err != nil {
		t.Fatalf("carol's visit: %v", err)
	}
	title, err := chromedp.Run(ctx, chromedp.Title())
	if err != nil {
		t.Fatal(err)
	}
	body, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`body`)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(title, "Not found") || strings.Contains(body, "deploy") || strings.Contains(body, batch) {
		t.Fatalf("carol's view of the request: %q\n%s", title, body)
	}
	// She is signed in: her inbox is hers, without the request.
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible(chromedp.CSS(`p.empty`))); err != nil {
		t.Fatalf("carol's inbox: %v", err)
	}
	page, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`body`)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(page, "carol@example.com") || strings.Contains(page, batch) {
		t.Fatalf("carol's inbox:\n%s", page)
	}
}

// TestPasskeyStepUpInChromium drives a step-up of passkey in real Chromium
// with Chrome's virtual authenticator (user verification on): a critical
// call's Allow in Slack changes nothing; a person registers a passkey on
// the console (after a fresh sign-in) and allows the call on its page with
// it and its phrase: the tool runs once, and the audit names the
// assurance. An assertion made for arguments that changed since (the
// database edited by hand between the challenge and the answer) is
// refused, and nothing runs.
func TestPasskeyStepUpInChromium(t *testing.T) {
	skipShort(t)
	ctx := browserCtx(t)
	r := newConsoleRig(t, `{"service":"api"}`, criticalDeployYAML, "confirmation: {step_up: {critical: passkey}}", alicePerson, true)
	api, tools, idp, base, addr, path, dir := r.api, r.tools, r.idp, r.base, r.addr, r.path, r.dir
	ref := r.mention(t, "EvKey1", "1800000090.000001", slack.ActionAllowTyped)
	batch, _, _ := strings.Cut(ref, ".")
	if code, err := postSigned(addr, actionBody("UALICE", slack.ActionAllowTyped, ref), "application/x-www-form-urlencoded"); err != nil || code != 200 {
		t.Fatalf("click: %d %v", code, err)
	}
	waitUntil(t, "the Slack Allow refused with the page", api.told("UALICE", "needs your passkey"))

	// Chrome's virtual authenticator, verifying its user.
	if _, err := chromedp.Call(ctx, webauthn.Enable, webauthn.EnableParams{}); err != nil {
		t.Fatalf("WebAuthn.enable: %v", err)
	}
	if _, err := chromedp.Call(ctx, webauthn.AddVirtualAuthenticator, webauthn.AddVirtualAuthenticatorParams{Options: &webauthn.VirtualAuthenticatorOptions{
		Protocol: webauthn.AuthenticatorProtocolCtap2, Transport: webauthn.AuthenticatorTransportInternal,
		HasResidentKey: true, HasUserVerification: true, IsUserVerified: true, AutomaticPresenceSimulation: true,
	}}); err != nil {
		t.Fatalf("WebAuthn.addVirtualAuthenticator: %v", err)
	}

	// Register a passkey, signed in a moment ago.
	idp.SignIn("alice@example.com", true, time.Time{})
	if err := chromedp.Do(ctx,
		chromedp.Navigate(base+"/ui/passkeys"),
		chromedp.WaitVisible(chromedp.CSS(`#add-passkey`)),
		chromedp.Click(chromedp.CSS(`#add-passkey`)),
		chromedp.WaitVisible(chromedp.CSS(`#passkey-result[data-state="added"]`)),
	); err != nil {
		out, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`body`)))
		t.Fatalf("registering a passkey: %v\n%s", err, out)
	}

	// A vote whose challenge was made for other arguments: refused.
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/ui/approvals/"+batch), chromedp.WaitVisible(chromedp.CSS(`button.passkey-allow`))); err != nil {
		t.Fatalf("the approval page: %v", err)
	}
	begin, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]any](`fetch(document.querySelector("button.passkey-allow").dataset.begin, {method: "POST",
		headers: {"Content-Type": "application/json", "X-CSRF-Token": document.querySelector('meta[name="csrf"]').content},
		body: JSON.stringify({ref: document.querySelector("button.passkey-allow").dataset.ref, phrase: "prod/api"})}).then(r => r.json())`, chromedp.EvalAwaitPromise))
	if err != nil || begin["ceremony"] == nil {
		t.Fatalf("begin a vote: %v %v", begin, err)
	}
	db, err := sql.Open("sqlite3", "file:"+dir+"/airlock.db?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE calls SET args = '{"service":"db"}' WHERE batch_id = ?`, batch); err != nil {
		t.Fatalf("edit by hand: %v", err)
	}
	beginJSON, _ := json.Marshal(begin)
	answer, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(async () => {
		const begin = `+string(beginJSON)+`;
		const dec = (s) => { s = s.replace(/-/g, "+").replace(/_/g, "/"); while (s.length % 4) s += "="; return Uint8Array.from(atob(s), c => c.charCodeAt(0)); };
		const enc = (b) => btoa(String.fromCharCode(...new Uint8Array(b))).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
		const pk = begin.options.publicKey;
		pk.challenge = dec(pk.challenge);
		(pk.allowCredentials || []).forEach(c => { c.id = dec(c.id); });
		const a = await navigator.credentials.get({publicKey: pk});
		const r = await fetch(document.querySelector("button.passkey-allow").dataset.finish + "?ceremony=" + encodeURIComponent(begin.ceremony), {method: "POST",
			headers: {"Content-Type": "application/json", "X-CSRF-Token": document.querySelector('meta[name="csrf"]').content},
			body: JSON.stringify({id: a.id, rawId: enc(a.rawId), type: a.type, response: {clientDataJSON: enc(a.response.clientDataJSON),
				authenticatorData: enc(a.response.authenticatorData), signature: enc(a.response.signature), userHandle: a.response.userHandle ? enc(a.response.userHandle) : null}})});
		return r.status + " " + (await r.text());
	})()`, chromedp.EvalAwaitPromise))
	if err != nil || !strings.HasPrefix(answer, "409") || !strings.Contains(answer, "arguments changed") {
		t.Fatalf("a vote for other arguments: %q %v", answer, err)
	}
	time.Sleep(300 * time.Millisecond)
	if n := tools.countPrefix("/deploy/"); n != 0 {
		t.Fatalf("deploy ran %d times after a vote for other arguments", n)
	}

	// A second request, allowed with the passkey and its phrase.
	ref2 := r.mention(t, "EvKey2", "1800000090.000002", slack.ActionAllowTyped) // the model asks for service api again
	batch2, _, _ := strings.Cut(ref2, ".")
	if err := chromedp.Do(ctx,
		chromedp.Navigate(base+"/ui/approvals/"+batch2),
		chromedp.WaitVisible(chromedp.CSS(`button.passkey-allow`)),
		chromedp.SendKeys(chromedp.CSS(`input[name="phrase"]`), "prod/api"),
		chromedp.Click(chromedp.CSS(`button.passkey-allow`)),
	); err != nil {
		t.Fatalf("allow with the passkey: %v", err)
	}
	waitUntil(t, "the deploy", func() bool { return tools.count("/deploy/api") == 1 })
	var out, errOut strings.Builder
	if code := run(t.Context(), []string{"audit", "export", "-config", path, "-format", "jsonl"}, nil, &out, &errOut); code != 0 {
		t.Fatalf("audit export: %d %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), `assurance\":\"passkey`) && !strings.Contains(out.String(), `"assurance":"passkey"`) {
		t.Fatalf("no decision with assurance passkey in the audit:\n%s", out.String())
	}
	waitUntil(t, "the card saying how it was allowed", func() bool {
		for _, u := range api.updates() {
			if all, _ := formatted(t, u.Get("blocks")); strings.Contains(all, "with a passkey") {
				return true
			}
		}
		return false
	})
	var table, tableErr strings.Builder
	if code := run(t.Context(), []string{"audit", "-config", path}, nil, &table, &tableErr); code != 0 || !strings.Contains(table.String(), "UALICE (passkey)") {
		t.Fatalf("airlock audit: %d %s\n%s", code, tableErr.String(), table.String())
	}
	if n := tools.countPrefix("/deploy/"); n != 1 {
		t.Fatalf("deploy ran %d times", n)
	}
}
