package callback

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/events"
)

// The handler takes a callback Airlock signed, and refuses a forged, a
// stale or a tampered one without delivering it.
func TestHandlerVerifies(t *testing.T) {
	const secret = "the-clients-callback-secret-0123"
	var got []Approval
	h := Handler(secret, func(_ context.Context, _ string, a Approval, _ *http.Request) error {
		got = append(got, a)
		return nil
	})
	body := []byte(`{"id":"b1","status":"allowed","args":{"command":"ls"},"session":"wf-1"}`)
	post := func(sig string, body []byte) int {
		req := httptest.NewRequest("POST", "/airlock/wf-1", strings.NewReader(string(body)))
		req.Header.Set("Airlock-Signature", sig)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	if code := post(events.Sign(secret, time.Now(), body), body); code != 204 || len(got) != 1 || got[0].Session != "wf-1" {
		t.Fatalf("a signed callback: %d %+v", code, got)
	}
	for name, sig := range map[string]string{
		"another secret": events.Sign("another-secret-0123456789", time.Now(), body),
		"stale":          events.Sign(secret, time.Now().Add(-time.Hour), body),
		"no signature":   "",
	} {
		if code := post(sig, body); code != 401 {
			t.Errorf("%s: %d", name, code)
		}
	}
	tampered := []byte(strings.Replace(string(body), `"ls"`, `"rm -rf /"`, 1))
	if code := post(events.Sign(secret, time.Now(), body), tampered); code != 401 {
		t.Errorf("a tampered body: %d", code)
	}
	if len(got) != 1 {
		t.Fatalf("delivered %d callbacks, want 1", len(got))
	}
}

// The LangGraph recipe's Python verify (examples/langgraph/README.md)
// accepts what Airlock signs and refuses a forgery, run by python3 when
// the machine has it.
func TestLangGraphRecipeVerifies(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	readme, err := os.ReadFile(filepath.Join("..", "langgraph", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	start := strings.Index(string(readme), "def verify(")
	end := strings.Index(string(readme), "def on_callback(")
	if start < 0 || end < start {
		t.Fatal("the recipe has no verify")
	}
	const secret = "the-graphs-callback-secret-012345"
	body := `{"id":"b1","status":"allowed"}`
	script := "import hashlib, hmac, sys, time\n" + string(readme)[start:end] + `
ok = verify(sys.argv[1], sys.argv[2], sys.argv[3].encode())
bad = verify(sys.argv[1], sys.argv[4], sys.argv[3].encode())
print("ok" if ok and not bad else "wrong: %s %s" % (ok, bad))
`
	good := events.Sign(secret, time.Now(), []byte(body))
	forged := events.Sign("another-secret-0123456789", time.Now(), []byte(body))
	out, err := exec.Command(py, "-c", script, secret, good, body, forged).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("python verify: %s %v", out, err)
	}
}
