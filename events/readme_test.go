package events_test

// The receiver code docs/webhooks.md shows (stdlib only), tested here:
// verify and the shell check are the page's, byte for byte
// (TestReadmeSnippetsAreTheReadmes), and the end-to-end test's receivers
// run verify in receive, which does what the page says in words.

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock/events"
)

// --- docs/webhooks.md snippet: Go ---

// verify checks the Airlock-Signature header of a request whose raw body
// is body: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">.
func verify(secret []byte, header string, body []byte, now time.Time) bool {
	var ts string
	var sigs []string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sigs = append(sigs, v)
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || now.Sub(time.Unix(sec, 0)).Abs() > 5*time.Minute {
		return false // no timestamp, or an old request replayed
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	want := mac.Sum(nil)
	for _, s := range sigs {
		if got, err := hex.DecodeString(s); err == nil && hmac.Equal(got, want) {
			return true
		}
	}
	return false
}

// receive verifies each request and handles each event once. Airlock
// sends every event at least once, so a retry of an event already handled
// is answered 200 and skipped. Answer 2xx only once the event is stored:
// any other answer is retried (and holds back the later events of its
// conversation).
func receive(secret []byte, handle func(id string, body []byte) error) http.HandlerFunc {
	var mu sync.Mutex
	seen := map[string]bool{} // in production: a table with a unique id column
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil || !verify(secret, r.Header.Get("Airlock-Signature"), body, time.Now()) {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var ev struct {
			ID   string `json:"id"`
			Type string `json:"type"`
		}
		if err := json.Unmarshal(body, &ev); err != nil || ev.ID == "" {
			http.Error(w, "bad event", http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if seen[ev.ID] {
			return // a retry of an event already handled
		}
		if err := handle(ev.ID, body); err != nil {
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		seen[ev.ID] = true
	}
}

// --- docs/webhooks.md snippet: shell ($SIG is the Airlock-Signature header, body.json the raw body) ---

const shellVerify = `t=$(printf '%s' "$SIG" | sed -n 's/.*t=\([0-9]*\).*/\1/p')
want=$( { printf '%s.' "$t"; cat body.json; } | openssl dgst -sha256 -hmac "$AIRLOCK_WEBHOOK_SECRET" | sed 's/^.*= //')
case ",$SIG," in *",v1=$want,"*) echo verified ;; *) echo "bad signature" >&2; exit 1 ;; esac`

// --- end of the docs/webhooks.md snippets ---

const secret = "whsec-0123456789abcdef0123456789abcdef"

// TestReadmeSnippetsAreTheReadmes keeps the snippets tested here equal to
// docs/webhooks.md's.
func TestReadmeSnippetsAreTheReadmes(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "docs", "webhooks.md"))
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.ReadFile("readme_test.go")
	if err != nil {
		t.Fatal(err)
	}
	start := strings.Index(string(self), "func verify(")
	end := strings.Index(string(self)[start:], "\n}\n")
	if start < 0 || end < 0 {
		t.Fatal("verify not found in readme_test.go")
	}
	for name, snippet := range map[string]string{"verify": string(self)[start : start+end+3], "the shell check": shellVerify} {
		if !strings.Contains(string(readme), snippet) {
			t.Errorf("docs/webhooks.md does not show %s as tested here:\n%s", name, snippet)
		}
	}
}

func TestReadmeVerify(t *testing.T) {
	body := []byte(`{"id":"e1","type":"tool_call","args":{"a":  "<&>"}}`)
	now := time.Now()
	sig := events.Sign(secret, now, body)
	if !verify([]byte(secret), sig, body, now) {
		t.Fatalf("docs/webhooks.md verify refused %s", sig)
	}
	if err := events.Verify(secret, sig, body, now, 5*time.Minute); err != nil {
		t.Fatalf("events.Verify: %v", err)
	}
	bad := []struct {
		name   string
		secret string
		header string
		body   []byte
		now    time.Time
	}{
		{"tampered body", secret, sig, append([]byte(nil), append(body[:len(body)-1], ' ', '}')...), now},
		{"other secret", "whsec-other-secret-0000000000", sig, body, now},
		{"replayed later", secret, sig, body, now.Add(6 * time.Minute)},
		{"from the future", secret, sig, body, now.Add(-6 * time.Minute)},
		{"no timestamp", secret, sig[strings.Index(sig, ",")+1:], body, now},
		{"no signature", secret, sig[:strings.Index(sig, ",")], body, now},
		{"timestamp changed", secret, "t=" + strconv.FormatInt(now.Unix()+1, 10) + sig[strings.Index(sig, ","):], body, now},
		{"empty", secret, "", body, now},
	}
	for _, b := range bad {
		if verify([]byte(b.secret), b.header, b.body, b.now) {
			t.Errorf("%s: docs/webhooks.md verify accepted", b.name)
		}
		if events.Verify(b.secret, b.header, b.body, b.now, 5*time.Minute) == nil {
			t.Errorf("%s: events.Verify accepted", b.name)
		}
	}
	// A header carrying a second v1 (a rotated secret) still verifies.
	rotated := sig + ",v1=" + strings.Repeat("ab", 32)
	if !verify([]byte(secret), rotated, body, now) || events.Verify(secret, rotated, body, now, time.Minute) != nil {
		t.Error("a second v1 value broke verification")
	}
}

func TestReadmeReceiveDeduplicates(t *testing.T) {
	var handled []string
	fail := true
	srv := httptest.NewServer(receive([]byte(secret), func(id string, body []byte) error {
		if fail {
			fail = false
			return io.ErrUnexpectedEOF // the first store fails: Airlock must retry
		}
		handled = append(handled, id)
		return nil
	}))
	defer srv.Close()
	post := func(body string, sig string) int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(body))
		req.Header.Set("Airlock-Signature", sig)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	body := `{"id":"e1","type":"decision"}`
	codes := []int{
		post(body, events.Sign(secret, time.Now(), []byte(body))),
		post(body, events.Sign(secret, time.Now(), []byte(body))),
		post(body, events.Sign(secret, time.Now(), []byte(body))),
		post(body, events.Sign("wrong-secret-000000000", time.Now(), []byte(body))),
	}
	if want := []int{503, 200, 200, 401}; !slices.Equal(codes, want) {
		t.Fatalf("answers = %v, want %v", codes, want)
	}
	if len(handled) != 1 || handled[0] != "e1" {
		t.Fatalf("handled = %v, want e1 once", handled)
	}
}

func TestReadmeShellVerify(t *testing.T) {
	for _, tool := range []string{"bash", "openssl", "sed"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	dir := t.TempDir()
	body := []byte(`{"id":"e1","args":{"a":  "<&>"},"s":"it's \"quoted\""}`)
	if err := os.WriteFile(filepath.Join(dir, "body.json"), body, 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(sig string) (string, error) {
		cmd := exec.Command("bash", "-c", shellVerify)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "SIG="+sig, "AIRLOCK_WEBHOOK_SECRET="+secret)
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	sig := events.Sign(secret, time.Now(), body)
	if out, err := run(sig); err != nil || out != "verified" {
		t.Fatalf("shell verify of a good signature: %q, %v", out, err)
	}
	if out, err := run(events.Sign("another-secret-0000000", time.Now(), body)); err == nil {
		t.Fatalf("shell verify accepted another secret's signature: %q", out)
	}
}
