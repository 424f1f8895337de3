package gateway_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock/gateway"
	"github.com/airlockhq/airlock/gateway/gatewaytest"
)

type counter struct{ n atomic.Int64 }

func (c *counter) GatewayUnauthorized() { c.n.Add(1) }

var (
	aliceToken = strings.Repeat("a", 40)
	bobToken   = strings.Repeat("b", 40)
)

func newAPI(t *testing.T, mem *gatewaytest.Memory, edit ...func(*gateway.Config)) (*httptest.Server, *counter) {
	t.Helper()
	cfg := gateway.Config{Clients: []gateway.Client{
		{Name: "alice-laptop", Token: aliceToken, ActsFor: "U0ALICE", Channel: gateway.ChannelRef{Platform: "slack", ID: "C0OPS"}, Ask: []string{"Bash"}},
		{Name: "bob-ci", Token: bobToken, ActsFor: "U0BOB", Channel: gateway.ChannelRef{Platform: "slack", ID: "C0OPS"}},
	}}
	for _, e := range edit {
		e(&cfg)
	}
	cfg.SetDefaults()
	m := &counter{}
	srv := httptest.NewServer((&gateway.API{Config: cfg, Approvals: mem, Metrics: m, Now: time.Now}).Handler())
	t.Cleanup(srv.Close)
	return srv, m
}

func call(t *testing.T, method, url, token, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
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

const bash = `{"tool":"Bash","args":{"command":"make deploy"},"session":"s1","call_id":"toolu_1"}`

// A missing or wrong token is 401 with no detail, counted, and creates
// nothing.
func TestWrongTokenCreatesNothing(t *testing.T) {
	mem := &gatewaytest.Memory{}
	srv, m := newAPI(t, mem)
	for _, tok := range []string{"", "Bearer", strings.Repeat("a", 39), strings.Repeat("c", 40)} {
		status, v := call(t, "POST", srv.URL+"/v1/approvals", tok, bash)
		if status != http.StatusUnauthorized || v["error"] != "unauthorized" {
			t.Errorf("token %q: %d %v", tok, status, v)
		}
	}
	if n, _ := mem.Counts(); n != 0 || m.n.Load() != 4 {
		t.Fatalf("%d approvals created, %d refusals counted", n, m.n.Load())
	}
}

// Bad input is refused naming the field, and creates nothing.
func TestBadRequestsNameTheField(t *testing.T) {
	mem := &gatewaytest.Memory{}
	srv, _ := newAPI(t, mem)
	big := `{"tool":"Bash","session":"s1","args":{"x":"` + strings.Repeat("y", 300<<10) + `"}}`
	for body, want := range map[string]struct {
		status int
		field  string
	}{
		`{"tool":`: {400, "not JSON"},
		`{"tool":"Bash","args":{},"session":"s1","extra":1}`:          {400, "unknown field"},
		`{"args":{},"session":"s1"}`:                                  {400, "tool:"},
		`{"tool":"Bash","args":[1],"session":"s1"}`:                   {400, "args:"},
		`{"tool":"Bash","session":"s1"}`:                              {400, "args:"},
		`{"tool":"Bash","args":{}}`:                                   {400, "session:"},
		`{"tool":"Bash","args":{},"session":"s1","wait":"2m"}`:        {400, "wait:"},
		`{"tool":"Bash","args":{},"session":"s1","wait":"soon"}`:      {400, "wait:"},
		`{"tool":"Bash","args":{},"session":"s1","callback_url":"x"}`: {400, "callback_url:"},
		big: {413, "args:"},
	} {
		status, v := call(t, "POST", srv.URL+"/v1/approvals", aliceToken, body)
		msg, _ := v["error"].(string)
		if status != want.status || !strings.Contains(msg, want.field) {
			t.Errorf("%.60s: %d %q, want %d naming %s", body, status, msg, want.status, want.field)
		}
	}
	if n, _ := mem.Counts(); n != 0 {
		t.Fatalf("%d approvals created by refused requests", n)
	}
}

// A request held with wait returns as soon as an approver decides; the
// identical retry is bound to it; it is consumed once.
func TestLongPollBindingAndConsumeOnce(t *testing.T) {
	mem := &gatewaytest.Memory{}
	srv, _ := newAPI(t, mem)
	go func() {
		time.Sleep(300 * time.Millisecond)
		mem.Decide("a1", gateway.StatusAllowed, "allowed by U0APPROVER", nil)
	}()
	start := time.Now()
	status, v := call(t, "POST", srv.URL+"/v1/approvals", aliceToken, strings.Replace(bash, `"call_id"`, `"wait":"10s","call_id"`, 1))
	if status != 200 || v["status"] != "allowed" || v["id"] != "a1" || time.Since(start) > 5*time.Second {
		t.Fatalf("%d %v after %v", status, v, time.Since(start))
	}
	// The identical retry, its arguments in another key order, is the same approval.
	status, v = call(t, "POST", srv.URL+"/v1/approvals", aliceToken, `{"session":"s1","args":{"command":"make deploy"},"tool":"Bash"}`)
	if status != 200 || v["id"] != "a1" {
		t.Fatalf("the retry: %d %v", status, v)
	}
	if status, _ := call(t, "POST", srv.URL+"/v1/approvals/a1/consume", aliceToken, ""); status != 200 {
		t.Fatalf("consume: %d", status)
	}
	status, v = call(t, "POST", srv.URL+"/v1/approvals/a1/consume", aliceToken, "")
	if status != 409 || v["error"] != "already consumed" {
		t.Fatalf("a second consume: %d %v", status, v)
	}
	status, v = call(t, "POST", srv.URL+"/v1/approvals/a1/result", aliceToken, `{"ok":true,"output":"deployed"}`)
	if status != 200 || mem.Results()["a1"] != "true deployed" {
		t.Fatalf("result: %d %v %v", status, v, mem.Results())
	}
	if status, _ := call(t, "POST", srv.URL+"/v1/approvals/a1/result", aliceToken, `{"ok":false}`); status != 409 {
		t.Fatalf("a second result: %d", status)
	}
	if _, c := mem.Counts(); c != 1 {
		t.Fatalf("%d consumes", c)
	}
}

// A pending or denied approval cannot be consumed; another client's
// approval is not found, whatever it asks of it.
func TestConsumeRefusedAndClientsApart(t *testing.T) {
	mem := &gatewaytest.Memory{}
	srv, _ := newAPI(t, mem)
	if status, v := call(t, "POST", srv.URL+"/v1/approvals", aliceToken, bash); status != 200 || v["status"] != "pending" {
		t.Fatalf("%d %v", status, v)
	}
	if status, v := call(t, "POST", srv.URL+"/v1/approvals/a1/consume", aliceToken, ""); status != 409 || v["status"] != "pending" {
		t.Fatalf("consume of a pending approval: %d %v", status, v)
	}
	mem.Decide("a1", gateway.StatusAllowed, "", nil)
	for _, path := range []string{"/v1/approvals/a1", "/v1/approvals/a1/consume"} {
		method := "GET"
		if strings.HasSuffix(path, "consume") {
			method = "POST"
		}
		if status, _ := call(t, method, srv.URL+path, bobToken, ""); status != 404 {
			t.Errorf("bob %s %s: %d, want 404", method, path, status)
		}
	}
	if _, c := mem.Counts(); c != 0 {
		t.Fatal("another client consumed alice's approval")
	}
}

// Past max_pending, or past requests_per_minute, a request is 429 and
// creates nothing.
func TestLimits(t *testing.T) {
	mem := &gatewaytest.Memory{}
	srv, _ := newAPI(t, mem, func(c *gateway.Config) { c.Clients[0].MaxPending, c.Clients[0].RequestsPerMinute = 2, 4 })
	for i := range 2 {
		body := strings.Replace(bash, "make deploy", "make deploy"+string(rune('a'+i)), 1)
		if status, _ := call(t, "POST", srv.URL+"/v1/approvals", aliceToken, body); status != 200 {
			t.Fatalf("request %d: %d", i, status)
		}
	}
	status, v := call(t, "POST", srv.URL+"/v1/approvals", aliceToken, strings.Replace(bash, "make deploy", "third", 1))
	if status != 429 || !strings.Contains(v["error"].(string), "max_pending") {
		t.Fatalf("a third waiting approval: %d %v", status, v)
	}
	mem.Decide("a1", gateway.StatusDenied, "no", nil)
	call(t, "POST", srv.URL+"/v1/approvals", aliceToken, strings.Replace(bash, "make deploy", "fourth", 1))
	status, v = call(t, "POST", srv.URL+"/v1/approvals", aliceToken, strings.Replace(bash, "make deploy", "fifth", 1))
	if status != 429 || !strings.Contains(v["error"].(string), "requests_per_minute") {
		t.Fatalf("a fifth request in a minute: %d %v", status, v)
	}
	if n, _ := mem.Counts(); n != 3 {
		t.Fatalf("%d approvals, want 3", n)
	}
}

// A request held longer than the server's write timeout still gets its
// answer (airlock run's is 30 s; a wait may be 60 s).
func TestWaitOutlivesTheWriteTimeout(t *testing.T) {
	mem := &gatewaytest.Memory{}
	cfg := gateway.Config{Clients: []gateway.Client{{Name: "alice-laptop", Token: aliceToken, ActsFor: "U0ALICE", Channel: gateway.ChannelRef{Platform: "slack", ID: "C0OPS"}}}}
	cfg.SetDefaults()
	srv := httptest.NewUnstartedServer((&gateway.API{Config: cfg, Approvals: mem, Now: time.Now}).Handler())
	srv.Config.WriteTimeout = 500 * time.Millisecond
	srv.Start()
	t.Cleanup(srv.Close)
	go func() {
		time.Sleep(1500 * time.Millisecond)
		mem.Decide("a1", gateway.StatusDenied, "no", nil)
	}()
	status, v := call(t, "POST", srv.URL+"/v1/approvals", aliceToken, strings.Replace(bash, `"call_id"`, `"wait":"5s","call_id"`, 1))
	if status != 200 || v["status"] != "denied" {
		t.Fatalf("%d %v", status, v)
	}
}
