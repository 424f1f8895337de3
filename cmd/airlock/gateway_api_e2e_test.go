package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock/adapters/discord/discordtest"
	"github.com/airlockhq/airlock/examples/callback"
)

const (
	gwBobToken     = "gw-bob-token-0123456789abcdefghijklmnop"
	gwAliceToken   = "gw-alice-token-0123456789abcdefghijklmno"
	gwCallbackKey  = "bob-callback-secret-0123456789abcdef"
	slackAllow     = "airlock_allow"
	slackAllowHour = "airlock_allow_grant"
)

// gwCall makes one request of the approval API with the token; it returns
// the status and the decoded JSON answer.
func gwCall(t *testing.T, method, url, token, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var v map[string]any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%s %s: %d, not JSON: %q", method, url, resp.StatusCode, raw)
	}
	return resp.StatusCode, v
}

// callbackReceiver is examples/callback's handler, the client's secret
// its key: it records the callbacks it takes, and refuses the first
// (500), which Airlock must send again.
type callbackReceiver struct {
	*httptest.Server
	mu       sync.Mutex
	attempts int
	got      []callback.Approval
	paths    []string
}

func newCallbackReceiver(t *testing.T, secret string) *callbackReceiver {
	r := &callbackReceiver{}
	r.Server = httptest.NewServer(callback.Handler(secret, func(_ context.Context, _ string, a callback.Approval, req *http.Request) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.attempts++; r.attempts == 1 {
			return errors.New("the workflow engine is down")
		}
		r.got, r.paths = append(r.got, a), append(r.paths, req.URL.Path)
		return nil
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *callbackReceiver) received() ([]callback.Approval, []string, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]callback.Approval(nil), r.got...), append([]string(nil), r.paths...), r.attempts
}

// gatewaySlackConfig is a Slack `airlock run` with two gateway clients:
// bob-laptop (acts for UBOB, Bash asks, callbacks to cb) and alice-laptop
// (acts for UALICE, one of the approvers), and a rule asking two people
// about bob's force-pushes.
func gatewaySlackConfig(head, callbackURL string) string {
	return fmt.Sprintf(`
%s
channels: [{platform: slack, id: COPS, approvers: [UALICE, UCAROL]}]
confirmation:
  rules:
    - {name: force-push, when: 'client == "bob-laptop" && tool == "Bash" && args.command.matches("git push.*--force")', action: ask, approvals: 2, risk: high}
gateway:
  clients:
    - {name: bob-laptop, token: %q, acts_for: UBOB, channel: {platform: slack, id: COPS}, ask: [Bash],
       callback_secret: %q, callback_urls: [%q]}
    - {name: alice-laptop, token: %q, acts_for: UALICE, channel: {platform: slack, id: COPS}, ask: [Bash]}
`, head, gwBobToken, gwCallbackKey, callbackURL+"/cb/", gwAliceToken)
}

// TestGatewayAPIOverSlack drives the approval API of a real `airlock run`
// (Slack, SQLite) as an agent outside Airlock would: a wrong token creates
// nothing; a pending approval outlives a restart; the approver's Allow
// reaches the long-poll and the signed callback; consume succeeds once;
// the result is recorded; a rule's quorum needs two people; the person an
// agent acts for cannot approve its calls; a grant covers later calls of
// its client's session only.
func TestGatewayAPIOverSlack(t *testing.T) {
	skipShort(t)
	api := newSlackAPI(t)
	model := callingModel(t)
	cb := newCallbackReceiver(t, gwCallbackKey)
	dir := t.TempDir()
	addr := freeAddr(t)
	base := "http://" + addr + "/v1/approvals"
	path := writeConfig(t, dir, gatewaySlackConfig(slackRunHead(addr, "sqlite", dir+"/airlock.db", model.BaseURL(), api.URL+"/api/"), cb.URL))
	proc, _ := startRun(t, path)
	waitReady(t, addr)
	press := func(user, actionID, value string) {
		t.Helper()
		if code, err := postSigned(addr, actionBody(user, actionID, value), "application/x-www-form-urlencoded"); err != nil || code != 200 {
			t.Fatalf("click: %d %v", code, err)
		}
	}
	// newCard waits for one more card than seen and returns its button.
	seen := 0
	newCard := func(actionID string) string {
		t.Helper()
		waitUntil(t, "a new card", func() bool { return len(api.buttons(slackAllow)) > seen })
		seen = len(api.buttons(slackAllow))
		vs := api.buttons(actionID)
		return vs[len(vs)-1]
	}

	// A wrong token: 401, no card.
	if status, v := gwCall(t, "POST", base, strings.Repeat("x", 40), `{"tool":"Bash","args":{"command":"rm -rf /"},"session":"s1"}`); status != 401 || v["error"] != "unauthorized" {
		t.Fatalf("a wrong token: %d %v", status, v)
	}

	// A callback to where the client may not send one, or from a client
	// without a callback secret: 400 naming callback_url, no card.
	for token, to := range map[string]string{gwBobToken: "http://169.254.169.254/latest/meta-data", gwAliceToken: cb.URL + "/cb/x"} {
		status, v := gwCall(t, "POST", base, token, `{"tool":"Bash","args":{"command":"ls"},"session":"s9","callback_url":"`+to+`"}`)
		if msg, _ := v["error"].(string); status != 400 || !strings.HasPrefix(msg, "callback_url:") || strings.Contains(msg, "169.254") {
			t.Fatalf("a callback_url refused: %d %v", status, v)
		}
	}
	if n := len(api.posts()); n != 0 {
		t.Fatalf("%d messages posted for refused requests", n)
	}

	// Pending, with a callback; then a restart.
	status, v := gwCall(t, "POST", base, gwBobToken, `{"tool":"Bash","args":{"command":"make deploy"},"session":"s1","call_id":"toolu_1",
		"reason":"deploying <!channel> the fix","callback_url":"`+cb.URL+`/cb/wf-7"}`)
	if status != 200 || v["status"] != "pending" || v["session"] != "s1" || v["call_id"] != "toolu_1" {
		t.Fatalf("create: %d %v", status, v)
	}
	id := v["id"].(string)
	allow := newCard(slackAllow)
	if posts := api.posts(); strings.Contains(posts[len(posts)-1].Get("blocks"), "<!channel>") {
		t.Fatal("the agent's reason pinged the channel")
	}
	_ = proc.Process.Kill()
	_ = proc.Wait()
	startRun(t, path)
	waitReady(t, addr)
	if status, v := gwCall(t, "GET", base+"/"+id, gwBobToken, ""); status != 200 || v["status"] != "pending" {
		t.Fatalf("after the restart: %d %v", status, v)
	}
	if status, _ := gwCall(t, "GET", base+"/"+id, gwAliceToken, ""); status != 404 {
		t.Fatalf("another client read bob's approval: %d", status)
	}
	if status, _ := gwCall(t, "POST", base+"/"+id+"/consume", gwBobToken, ""); status != 409 {
		t.Fatalf("consuming a pending approval: %d", status)
	}

	// Allow: the long-poll returns allowed, the callback arrives signed.
	polled := make(chan map[string]any, 1)
	go func() {
		_, v := gwCall(t, "GET", base+"/"+id+"?wait=20s", gwBobToken, "")
		polled <- v
	}()
	time.Sleep(300 * time.Millisecond)
	press("UALICE", slackAllow, allow)
	select {
	case v := <-polled:
		if v["status"] != "allowed" || v["decided_by"] != "UALICE" {
			t.Fatalf("the long-poll: %v", v)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the long-poll did not return after the Allow")
	}
	waitUntil(t, "the callback, sent again after a 500", func() bool { got, _, _ := cb.received(); return len(got) == 1 })
	got, paths, attempts := cb.received()
	if c := got[0]; c.ID != id || c.Status != "allowed" || c.Session != "s1" || c.CallID != "toolu_1" || c.DecidedBy != "UALICE" || paths[0] != "/cb/wf-7" || attempts != 2 {
		t.Fatalf("the callback: %+v at %v after %d attempts", c, paths, attempts)
	}
	codes := map[int]int{}
	for range 3 {
		status, _ := gwCall(t, "POST", base+"/"+id+"/consume", gwBobToken, "")
		codes[status]++
	}
	if codes[200] != 1 || codes[409] != 2 {
		t.Fatalf("three consumes: %v, want one 200 and two 409", codes)
	}
	if status, v := gwCall(t, "POST", base+"/"+id+"/result", gwBobToken, `{"ok":true,"output":"deployed"}`); status != 200 {
		t.Fatalf("result: %d %v", status, v)
	}
	if status, _ := gwCall(t, "POST", base+"/"+id+"/result", gwBobToken, `{"ok":true,"output":"again"}`); status != 409 {
		t.Fatalf("a second result: %d", status)
	}

	// A force-push asks two people.
	_, v = gwCall(t, "POST", base, gwBobToken, `{"tool":"Bash","args":{"command":"git push origin main --force"},"session":"s1"}`)
	push := v["id"].(string)
	value := newCard(slackAllow)
	press("UALICE", slackAllow, value)
	time.Sleep(500 * time.Millisecond)
	if _, v := gwCall(t, "GET", base+"/"+push, gwBobToken, ""); v["status"] != "pending" {
		t.Fatalf("after one of two approvals: %v", v)
	}
	press("UCAROL", slackAllow, value)
	if _, v := gwCall(t, "GET", base+"/"+push+"?wait=10s", gwBobToken, ""); v["status"] != "allowed" {
		t.Fatalf("after two approvals: %v", v)
	}

	// alice-laptop's call: UALICE cannot approve it, UCAROL can.
	_, v = gwCall(t, "POST", base, gwAliceToken, `{"tool":"Bash","args":{"command":"make release"},"session":"a1"}`)
	mine := v["id"].(string)
	value = newCard(slackAllow)
	press("UALICE", slackAllow, value)
	waitUntil(t, "UALICE told she cannot approve her own agent's call", func() bool { return len(api.ephemerals("UALICE")) > 0 })
	if _, v := gwCall(t, "GET", base+"/"+mine, gwAliceToken, ""); v["status"] != "pending" {
		t.Fatalf("the requester approved her own agent's call: %v", v)
	}
	press("UCAROL", slackAllow, value)
	if _, v := gwCall(t, "GET", base+"/"+mine+"?wait=10s", gwAliceToken, ""); v["status"] != "allowed" {
		t.Fatalf("another approver's allow: %v", v)
	}

	// "Allow for 1h" on bob's s2 call: his later Bash calls in s2 are
	// allowed by the grant, not those of s3 or alice's.
	_, v = gwCall(t, "POST", base, gwBobToken, `{"tool":"Bash","args":{"command":"ls"},"session":"s2"}`)
	first := v["id"].(string)
	press("UCAROL", slackAllowHour, newCard(slackAllowHour))
	if _, v := gwCall(t, "GET", base+"/"+first+"?wait=10s", gwBobToken, ""); v["status"] != "allowed" {
		t.Fatalf("the granting allow: %v", v)
	}
	if _, v := gwCall(t, "POST", base, gwBobToken, `{"tool":"Bash","args":{"command":"ls -la"},"session":"s2"}`); v["status"] != "allowed" || !strings.HasPrefix(v["reason"].(string), "a grant of Bash by UCAROL until ") {
		t.Fatalf("a later call in the granted session: %v", v)
	}
	if _, v := gwCall(t, "POST", base, gwBobToken, `{"tool":"Bash","args":{"command":"ls -la"},"session":"s3"}`); v["status"] != "pending" {
		t.Fatalf("a call in another session: %v", v)
	}
	if _, v := gwCall(t, "POST", base, gwAliceToken, `{"tool":"Bash","args":{"command":"ls -la"},"session":"s2"}`); v["status"] != "pending" {
		t.Fatalf("another client's call in a session of the same name: %v", v)
	}

	// The audit tells who asked: the person, the client and its session.
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"audit", "-config", path, "-json"}, nil, &out, &errOut); code != 0 {
		t.Fatalf("airlock audit: %d %s", code, errOut.String())
	}
	var records []struct {
		BatchID                  string `json:"batch_id"`
		AskedBy                  string `json:"asked_by"`
		Client, Session, Outcome string
	}
	if err := json.Unmarshal(out.Bytes(), &records); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range records {
		if r.BatchID == id {
			found = r.Client == "bob-laptop" && r.Session == "s1" && r.AskedBy == "UBOB" && r.Outcome == "succeeded"
			if !found {
				t.Fatalf("the audit's record of the first call: %+v", r)
			}
		}
	}
	if !found {
		t.Fatalf("no audit record of %s in %s", id, out.String())
	}
}

// discordButton is the custom id of the button labelled label on the
// newest message posted in channel.
func discordButton(t *testing.T, fd *discordtest.Server, channel, label string) (customID, messageID string) {
	t.Helper()
	posts := fd.Recorded("POST", "/channels/"+channel+"/messages")
	last := posts[len(posts)-1]
	rows, _ := last.JSON(t)["components"].([]any)
	for _, r := range rows {
		buttons, _ := r.(map[string]any)["components"].([]any)
		for _, x := range buttons {
			b, _ := x.(map[string]any)
			if b["label"] == label {
				return b["custom_id"].(string), last.ID()
			}
		}
	}
	t.Fatalf("no %q button on the newest card: %s", label, last.Body)
	return "", ""
}

// discordForm presses a button that opens a form, as user (with roles),
// and submits the form's one text input filled with text.
func discordForm(t *testing.T, fd *discordtest.Server, seq *int, user string, roles []string, customID, messageID, text string) {
	t.Helper()
	*seq++
	id := fmt.Sprint(7000 + *seq)
	fd.Send("INTERACTION_CREATE", discordtest.Click(id, discordtest.ChannelID, user, roles, customID, messageID))
	cb := fd.WaitFor("POST", "/interactions/"+id+"/token-"+id+"/callback", 1)[0].JSON(t)
	data, _ := cb["data"].(map[string]any)
	rows, _ := data["components"].([]any)
	if cb["type"] != float64(9) || len(rows) != 1 {
		t.Fatalf("the button opened no form: %v", cb)
	}
	modal := data["custom_id"].(string)
	input := rows[0].(map[string]any)["components"].([]any)[0].(map[string]any)["custom_id"].(string)
	*seq++
	id = fmt.Sprint(7000 + *seq)
	fd.Send("INTERACTION_CREATE", discordtest.ModalSubmit(id, discordtest.ChannelID, user, roles, modal, input, text, messageID))
	fd.WaitFor("POST", "/interactions/"+id+"/token-"+id+"/callback", 1)
}

// discordGateway starts `airlock run` on Discord (the fake, its channel's
// approvers those with the moderator role) with one gateway client, whose
// token is gwBobToken, acting for discordtest.Requester and asking about
// the tools ask; it returns the fake and the address, once connected.
func discordGateway(t *testing.T, client, ask string) (*discordtest.Server, string) {
	t.Helper()
	fd := discordtest.New(t, true)
	dir := t.TempDir()
	addr := freeAddr(t)
	cfg := fmt.Sprintf(`listen: %s
storage: {dsn: %q}
model: {provider: openai, name: m, base_url: "http://127.0.0.1:9/v1"}
discord: {token: "${DISCORD_BOT_TOKEN}", api_url: %s}
channels: [{platform: discord, id: %q, approver_roles: [%q]}]
gateway:
  clients:
    - {name: %s, token: %q, acts_for: %q, channel: {platform: discord, id: %q}, ask: %s}
`, addr, dir+"/a.db", fd.APIURL(), discordtest.ChannelID, discordtest.ModRole, client, gwBobToken, discordtest.Requester, discordtest.ChannelID, ask)
	_, logs := startRun(t, writeConfig(t, dir, cfg), "DISCORD_BOT_TOKEN="+discordtest.Token)
	waitReady(t, addr)
	waitUntil(t, "connected", func() bool { return strings.Contains(logs.String(), "discord: connected") })
	return fd, addr
}

// TestGatewayAPIOverDiscord: a gateway client's cards in a Discord
// channel; Deny with reason… gives the agent the approver's reason, and
// Edit… allows the approver's arguments, which are what the agent runs.
func TestGatewayAPIOverDiscord(t *testing.T) {
	skipShort(t)
	fd, addr := discordGateway(t, "ci-bot", `["deploy*"]`)
	base := "http://" + addr + "/v1/approvals"
	mod := []string{discordtest.ModRole}
	seq := 0
	cards := func() int { return len(fd.Recorded("POST", "/channels/"+discordtest.ChannelID+"/messages")) }

	// Deny with reason.
	_, v := gwCall(t, "POST", base, gwBobToken, `{"tool":"deploy","args":{"service":"api","env":"prod"},"session":"pipeline-41"}`)
	id, _ := v["id"].(string)
	waitUntil(t, "the card", func() bool { return cards() == 1 })
	if body := strings.ReplaceAll(string(fd.Recorded("POST", "/channels/"+discordtest.ChannelID+"/messages")[0].Body), `\\`, ""); !strings.Contains(body, "ci-bot") || !strings.Contains(body, "pipeline-41") {
		t.Fatalf("the card does not name the client and session: %s", body)
	}
	button, msg := discordButton(t, fd, discordtest.ChannelID, "Deny with reason…")
	discordForm(t, fd, &seq, discordtest.Moderator, mod, button, msg, "not during the freeze")
	if _, v := gwCall(t, "GET", base+"/"+id+"?wait=10s", gwBobToken, ""); v["status"] != "denied" || !strings.Contains(fmt.Sprint(v["reason"]), "not during the freeze") {
		t.Fatalf("after Deny with reason: %v", v)
	}
	if status, _ := gwCall(t, "POST", base+"/"+id+"/consume", gwBobToken, ""); status != 409 {
		t.Fatalf("consuming a denied approval: %d", status)
	}

	// Edit…: allowed with the approver's arguments.
	_, v = gwCall(t, "POST", base, gwBobToken, `{"tool":"deploy","args":{"service":"api","env":"prod"},"session":"pipeline-42"}`)
	id, _ = v["id"].(string)
	waitUntil(t, "the second card", func() bool { return cards() == 2 })
	button, msg = discordButton(t, fd, discordtest.ChannelID, "Edit…")
	discordForm(t, fd, &seq, discordtest.Moderator, mod, button, msg, `{"service":"api","env":"canary"}`)
	_, v = gwCall(t, "GET", base+"/"+id+"?wait=10s", gwBobToken, "")
	if args, _ := json.Marshal(v["args"]); v["status"] != "allowed" || string(args) != `{"env":"canary","service":"api"}` {
		t.Fatalf("after Edit…: %v", v)
	}
	if status, v := gwCall(t, "POST", base+"/"+id+"/consume", gwBobToken, ""); status != 200 || !strings.Contains(fmt.Sprint(v["args"]), "canary") {
		t.Fatalf("consume after Edit…: %d %v", status, v)
	}
}

// TestGatewayReplicasConsumeOnce: two `airlock run` replicas on one
// PostgreSQL database. A request made on one is allowed by a click on the
// other; twenty consumes at once, ten on each, carry it out once; the
// callback is queued once and delivered once.
func TestGatewayReplicasConsumeOnce(t *testing.T) {
	pg := os.Getenv("AIRLOCK_TEST_POSTGRES_DSN")
	if pg == "" || testing.Short() {
		t.Skip("set AIRLOCK_TEST_POSTGRES_DSN (CI does) to run the replica test")
	}
	dsn := freshSchema(t, pg)
	api := newSlackAPI(t)
	model := callingModel(t)
	cb := newCallbackReceiver(t, gwCallbackKey)
	dir := t.TempDir()
	var addrs []string
	for i := range 2 {
		addr := freeAddr(t)
		path := filepath.Join(dir, fmt.Sprintf("replica%d.yaml", i))
		if err := os.WriteFile(path, []byte(gatewaySlackConfig(slackRunHead(addr, "postgres", dsn, model.BaseURL(), api.URL+"/api/"), cb.URL)), 0o600); err != nil {
			t.Fatal(err)
		}
		startRun(t, path)
		waitReady(t, addr)
		addrs = append(addrs, addr)
	}
	status, v := gwCall(t, "POST", "http://"+addrs[0]+"/v1/approvals", gwBobToken,
		`{"tool":"Bash","args":{"command":"make deploy"},"session":"s1","callback_url":"`+cb.URL+`/cb/wf-1"}`)
	if status != 200 || v["status"] != "pending" {
		t.Fatalf("create: %d %v", status, v)
	}
	id := v["id"].(string)
	waitUntil(t, "the card", func() bool { return len(api.buttons(slackAllow)) == 1 })
	if code, err := postSigned(addrs[1], actionBody("UALICE", slackAllow, api.buttons(slackAllow)[0]), "application/x-www-form-urlencoded"); err != nil || code != 200 {
		t.Fatalf("click on replica 1: %d %v", code, err)
	}
	if _, v := gwCall(t, "GET", "http://"+addrs[0]+"/v1/approvals/"+id+"?wait=10s", gwBobToken, ""); v["status"] != "allowed" {
		t.Fatalf("replica 0 after the click on replica 1: %v", v)
	}
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 20 {
		wg.Go(func() {
			<-start
			status, _ := gwCall(t, "POST", "http://"+addrs[i%2]+"/v1/approvals/"+id+"/consume", gwBobToken, "")
			mu.Lock()
			defer mu.Unlock()
			codes[status]++
		})
	}
	close(start)
	wg.Wait()
	if codes[200] != 1 || codes[409] != 19 {
		t.Fatalf("twenty consumes on two replicas: %v, want one 200", codes)
	}
	waitUntil(t, "the callback", func() bool { got, _, _ := cb.received(); return len(got) == 1 })
	time.Sleep(3 * time.Second) // both replicas' jobs and deliverers ran meanwhile
	if got, _, attempts := cb.received(); len(got) != 1 || attempts != 2 {
		t.Fatalf("callbacks: %d delivered in %d attempts; want one, after one refused", len(got), attempts)
	}
}
