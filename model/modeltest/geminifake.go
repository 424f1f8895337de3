package modeltest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// GeminiRequest is a generateContent request as the fake Gemini received
// it.
type GeminiRequest struct {
	Method string
	Path   string // "/v1beta/models/<model>:generateContent"
	Query  string
	Header http.Header    // the API key comes in x-goog-api-key
	Body   map[string]any // the JSON body decoded
	Raw    []byte         // the body as received
}

// GeminiReply is what the fake Gemini answers to one request: an HTTP
// status and a JSON body (a generateContent response or a Google API
// error).
type GeminiReply struct {
	Status int
	Body   string
}

// GeminiContentReply answers 200 with one candidate whose content (JSON:
// {"role":"model","parts":[...]}) finished with STOP.
func GeminiContentReply(content string) GeminiReply {
	return GeminiReply{http.StatusOK, `{"candidates":[{"content":` + content + `,"finishReason":"STOP","index":0}],"modelVersion":"gemini-test"}`}
}

// GeminiQueue returns a handler that answers with replies in order. Past
// the last reply it answers 500 INTERNAL, as an overloaded Gemini would.
func GeminiQueue(replies ...GeminiReply) func(GeminiRequest) GeminiReply {
	return inOrder[GeminiRequest](replies, func() GeminiReply {
		return GeminiReply{http.StatusInternalServerError, `{"error":{"code":500,"message":"no answer queued","status":"INTERNAL"}}`}
	})
}

// GeminiServer is a fake Gemini API (generateContent) on 127.0.0.1:
// configure the client's base URL with URL. It records every request.
type GeminiServer struct {
	*httptest.Server
	t       testing.TB
	handler func(GeminiRequest) GeminiReply

	mu  sync.Mutex
	got []GeminiRequest
}

// NewGeminiServer starts a fake answering each request with handler's
// reply and closes it when the test ends. handler runs on the server's
// goroutine: it may call t.Errorf but not t.Fatal. A body that is not JSON
// marks t failed.
func NewGeminiServer(t testing.TB, handler func(GeminiRequest) GeminiReply) *GeminiServer {
	t.Helper()
	s := &GeminiServer{t: t, handler: handler}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// Requests returns the requests received so far, in order.
func (s *GeminiServer) Requests() []GeminiRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]GeminiRequest(nil), s.got...)
}

func (s *GeminiServer) serve(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		s.t.Errorf("gemini fake: read body: %v", err)
	}
	req := GeminiRequest{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Raw: raw}
	if err := json.Unmarshal(raw, &req.Body); err != nil {
		s.t.Errorf("gemini fake: request body is not json: %v: %s", err, raw)
	}
	s.mu.Lock()
	s.got = append(s.got, req)
	s.mu.Unlock()
	a := s.handler(req)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(a.Status)
	_, _ = io.WriteString(w, a.Body)
}
