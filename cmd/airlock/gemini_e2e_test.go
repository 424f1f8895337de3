package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/model/modeltest"
)

const thoughtSig = "c2lnbmF0dXJlLW9mLWEtdGhvdWdodA=="

// newFakeGemini is a Gemini that speaks generateContent. Like Gemini 3, it
// refuses a request whose earlier function call comes back without its
// thought signature.
func newFakeGemini(t *testing.T) *modeltest.GeminiServer {
	return modeltest.NewGeminiServer(t, func(r modeltest.GeminiRequest) modeltest.GeminiReply {
		if r.Path != "/v1beta/models/gemini-test:generateContent" || r.Header.Get("x-goog-api-key") != "gm-key" {
			return modeltest.GeminiReply{Status: http.StatusNotFound, Body: fmt.Sprintf(`{"error":{"code":404,"message":"unexpected %s","status":"NOT_FOUND"}}`, r.Path)}
		}
		if r.Body == nil {
			return modeltest.GeminiReply{Status: http.StatusBadRequest}
		}
		contents, _ := r.Body["contents"].([]any)
		last := contents[len(contents)-1].(map[string]any)
		parts, _ := last["parts"].([]any)
		first, _ := parts[0].(map[string]any)
		if fr, ok := first["functionResponse"].(map[string]any); ok {
			if !strings.Contains(string(r.Raw), thoughtSig) {
				return modeltest.GeminiReply{Status: http.StatusBadRequest, Body: `{"error":{"code":400,"message":"Function call is missing a thought_signature","status":"INVALID_ARGUMENT"}}`}
			}
			resp, _ := json.Marshal(fr["response"])
			return modeltest.GeminiContentReply(fmt.Sprintf(`{"role":"model","parts":[{"text":%q}]}`, "gemini saw: "+string(resp)))
		}
		return modeltest.GeminiContentReply(fmt.Sprintf(`{"role":"model","parts":[
			{"text":"Deploying needs your approval.","thoughtSignature":"dGV4dC1zaWc="},
			{"functionCall":{"name":"deploy","args":{"service":"api","environment":"production"}},"thoughtSignature":%q}
		]}`, thoughtSig))
	})
}

// TestEndToEndGemini drives the binary with the Gemini provider: a call
// without an id is keyed by position, the model's content (with its thought
// signature) survives a SIGKILL in the database and goes back verbatim.
func TestEndToEndGemini(t *testing.T) {
	skipShort(t)
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
