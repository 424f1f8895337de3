package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

const thoughtSig = "c2lnbmF0dXJlLW9mLWEtdGhvdWdodA=="

// fakeGemini speaks generateContent. Like Gemini 3, it refuses a request
// whose earlier function call comes back without its thought signature.
type fakeGemini struct {
	*httptest.Server
	mu       sync.Mutex
	requests []map[string]any
}

func newFakeGemini(t *testing.T) *fakeGemini {
	f := &fakeGemini{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path != "/v1beta/models/gemini-test:generateContent" || r.Header.Get("x-goog-api-key") != "gm-key" {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprintf(w, `{"error":{"code":404,"message":"unexpected %s","status":"NOT_FOUND"}}`, r.URL.Path)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var req map[string]any
		if err := json.Unmarshal(body, &req); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.requests = append(f.requests, req)
		f.mu.Unlock()
		contents, _ := req["contents"].([]any)
		last := contents[len(contents)-1].(map[string]any)
		parts, _ := last["parts"].([]any)
		first, _ := parts[0].(map[string]any)
		if fr, ok := first["functionResponse"].(map[string]any); ok {
			if !strings.Contains(string(body), thoughtSig) {
				w.WriteHeader(http.StatusBadRequest)
				fmt.Fprint(w, `{"error":{"code":400,"message":"Function call is missing a thought_signature","status":"INVALID_ARGUMENT"}}`)
				return
			}
			resp, _ := json.Marshal(fr["response"])
			fmt.Fprintf(w, `{"candidates":[{"content":{"role":"model","parts":[{"text":%q}]},"finishReason":"STOP"}]}`, "gemini saw: "+string(resp))
			return
		}
		fmt.Fprintf(w, `{"candidates":[{"content":{"role":"model","parts":[
			{"text":"Deploying needs your approval.","thoughtSignature":"dGV4dC1zaWc="},
			{"functionCall":{"name":"deploy","args":{"service":"api","environment":"production"}},"thoughtSignature":%q}
		]},"finishReason":"STOP"}]}`, thoughtSig)
	}))
	t.Cleanup(f.Close)
	return f
}

// TestEndToEndGemini drives the binary with the Gemini provider: a call
// without an id is keyed by position, the model's content (with its thought
// signature) survives a SIGKILL in the database and goes back verbatim.
func TestEndToEndGemini(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	gem := newFakeGemini(t)
	tools := newToolServer(t)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "airlock.yaml")
	cfg := fmt.Sprintf(e2eConfig, filepath.Join(dir, "airlock.db"), gem.URL, tools.URL, tools.URL)
	cfg = strings.Replace(cfg, "provider: openai\n  name: fake-model\n  api_key: ${AIRLOCK_E2E_MODEL_KEY:-sk-test}", "provider: gemini\n  name: gemini-test\n  api_key: gm-key", 1)
	if !strings.Contains(cfg, "provider: gemini") {
		t.Fatal("config template changed")
	}
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startChat(t, cfgPath)
	p.send("deploy the api")
	card := p.waitFor("/allow N")
	if !strings.Contains(card, "The agent says: Deploying needs your approval.") || !strings.Contains(card, "[1] deploy: Deploy api to production") {
		t.Fatalf("card:\n%s", card)
	}
	p.kill()
	p = startChat(t, cfgPath)
	p.waitFor("/allow N")
	p.send("/allow 1")
	answer := p.waitFor("gemini saw:") + p.waitFor("\n")
	if !strings.Contains(answer, `/deploy/api`) {
		t.Fatalf("answer: %q", answer)
	}
	hits := tools.calls()
	if len(hits) != 1 || !strings.HasSuffix(hits[0].IdempotencyKey, "/#0") {
		t.Fatalf("tool calls: %+v", hits)
	}
}
