package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type recorded struct {
	method     string
	requestURI string
	path       string
	query      map[string][]string
	header     http.Header
	body       []byte
}

// recorder is an httptest server on 127.0.0.1 that records requests and
// answers with the handler's reply.
type recorder struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []recorded
}

func newRecorder(t *testing.T, reply http.HandlerFunc) *recorder {
	t.Helper()
	r := &recorder{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.reqs = append(r.reqs, recorded{req.Method, req.RequestURI, req.URL.Path, req.URL.Query(), req.Header.Clone(), body})
		r.mu.Unlock()
		reply(w, req)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *recorder) last(t *testing.T) recorded {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.reqs) == 0 {
		t.Fatal("no request")
	}
	return r.reqs[len(r.reqs)-1]
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.reqs)
}

func reply(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

var itemSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"id":    map[string]any{"type": "string"},
		"q":     map[string]any{"type": "string"},
		"n":     map[string]any{"type": "integer"},
		"extra": map[string]any{},
	},
	"required": []any{"id"},
}

func httpSet(t *testing.T, srv *recorder, cfg HTTPConfig, opts Options) Tool {
	t.Helper()
	cfg.URL = srv.URL + cfg.URL
	s := mustNew(t, []Config{{Name: "call", Parameters: itemSchema, HTTP: &cfg}}, opts)
	return mustGet(t, s, "call")
}

func TestHTTPRequest(t *testing.T) {
	srv := newRecorder(t, reply(200, `{"ok":true}`))
	tool := httpSet(t, srv, HTTPConfig{
		Method:  "put",
		URL:     "/v1/items/{{.id}}/tag?q={{.q}}&n={{.n}}",
		Headers: map[string]string{"Authorization": "Bearer s3cret", "X-Team": "ops"},
	}, Options{})

	args := `{ "q": "x&admin=1#frag",  "id":"a/b?c=d", "n": 10000000000 }`
	out, err := tool.Run(context.Background(), json.RawMessage(args), "batch-7/call_1")
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if out != `{"ok":true}` {
		t.Errorf("result %q", out)
	}
	got := srv.last(t)
	if got.method != "PUT" {
		t.Errorf("method %s", got.method)
	}
	if want := "/v1/items/a%2Fb%3Fc%3Dd/tag?q=x%26admin%3D1%23frag&n=10000000000"; got.requestURI != want {
		t.Errorf("request URI\n got %s\nwant %s", got.requestURI, want)
	}
	if got.path != "/v1/items/a/b?c=d/tag" {
		t.Errorf("decoded path %q", got.path)
	}
	if len(got.query) != 2 || got.query["q"][0] != "x&admin=1#frag" || got.query["n"][0] != "10000000000" {
		t.Errorf("query %v", got.query)
	}
	if string(got.body) != args {
		t.Errorf("body %q, want the exact arguments %q", got.body, args)
	}
	for name, want := range map[string]string{
		"Authorization":   "Bearer s3cret",
		"X-Team":          "ops",
		"Idempotency-Key": "batch-7/call_1",
		"Content-Type":    "application/json",
	} {
		if v := got.header.Get(name); v != want {
			t.Errorf("header %s = %q, want %q", name, v, want)
		}
	}
}

func TestHTTPDefaultsAndGet(t *testing.T) {
	srv := newRecorder(t, reply(204, ""))
	post := httpSet(t, srv, HTTPConfig{URL: "/hook"}, Options{})
	if out, err := post.Run(context.Background(), json.RawMessage(`{"id":"1"}`), "k"); err != nil || out != "" {
		t.Fatalf("Run = %q, %v", out, err)
	}
	if got := srv.last(t); got.method != "POST" || string(got.body) != `{"id":"1"}` {
		t.Errorf("default method: %s %q", got.method, got.body)
	}

	get := httpSet(t, srv, HTTPConfig{Method: "GET", URL: "/items/{{.id}}"}, Options{})
	if _, err := get.Run(context.Background(), json.RawMessage(`{"id":"42"}`), "k"); err != nil {
		t.Fatalf("GET: %v", err)
	}
	if got := srv.last(t); got.method != "GET" || len(got.body) != 0 || got.path != "/items/42" || got.header.Get("Content-Type") != "" {
		t.Errorf("GET sent %s %s body %q content-type %q", got.method, got.path, got.body, got.header.Get("Content-Type"))
	}
}

func TestHTTPURLValuesStayData(t *testing.T) {
	srv := newRecorder(t, reply(200, "ok"))
	tool := httpSet(t, srv, HTTPConfig{URL: "/users/{{.id}}/delete{{with index . \"q\"}}?q={{.}}{{end}}"}, Options{})
	// Even escaped, a value that decodes to a dot segment is refused: some
	// servers decode the path before they clean it.
	for _, id := range []string{"..", ".", "", "../../admin", "x/../../admin"} {
		_, err := tool.Run(context.Background(), json.RawMessage(`{"id":"`+id+`"}`), "k")
		if err == nil {
			t.Errorf("id %q: no error", id)
		}
	}
	if n := srv.count(); n != 0 {
		t.Errorf("%d requests sent for rejected paths", n)
	}
	// An empty value in the query is fine; a value object is escaped JSON.
	if _, err := tool.Run(context.Background(), json.RawMessage(`{"id":"7","q":"a b"}`), "k"); err != nil {
		t.Errorf("query value: %v", err)
	}
	if got := srv.last(t); got.requestURI != "/users/7/delete?q=a%20b" {
		t.Errorf("request URI %s", got.requestURI)
	}
	if _, err := tool.Run(context.Background(), json.RawMessage(`{"id":"7"}`), "k"); err != nil {
		t.Errorf("optional value absent: %v", err)
	}
	if got := srv.last(t); got.requestURI != "/users/7/delete" {
		t.Errorf("request URI %s", got.requestURI)
	}
	query := httpSet(t, srv, HTTPConfig{URL: "/search?q={{.q}}"}, Options{})
	if _, err := query.Run(context.Background(), json.RawMessage(`{"id":"7","q":""}`), "k"); err != nil {
		t.Errorf("empty query value: %v", err)
	}
	obj := httpSet(t, srv, HTTPConfig{URL: "/x/{{.extra}}?j={{json .extra}}"}, Options{})
	if _, err := obj.Run(context.Background(), json.RawMessage(`{"id":"7","extra":{"a":"/b"}}`), "k"); err != nil {
		t.Fatalf("object value: %v", err)
	}
	if got := srv.last(t); got.requestURI != "/x/%7B%22a%22%3A%22%2Fb%22%7D?j=%7B%22a%22%3A%22%2Fb%22%7D" {
		t.Errorf("request URI %s", got.requestURI)
	}
}

func TestHTTPRefusesInvalidArgs(t *testing.T) {
	srv := newRecorder(t, reply(200, "ok"))
	tool := httpSet(t, srv, HTTPConfig{URL: "/x"}, Options{})
	_, err := tool.Run(context.Background(), json.RawMessage(`{"id":5}`), "k")
	if !errors.Is(err, ErrInvalidArgs) {
		t.Errorf("Run with invalid args: %v", err)
	}
	if srv.count() != 0 {
		t.Error("request sent for invalid args")
	}
}

func TestHTTPErrorStatus(t *testing.T) {
	srv := newRecorder(t, reply(500, "boom: database down\n"+strings.Repeat("x", 2000)))
	tool := httpSet(t, srv, HTTPConfig{URL: "/x"}, Options{})
	_, err := tool.Run(context.Background(), json.RawMessage(`{"id":"1"}`), "k")
	if err == nil || !strings.HasPrefix(err.Error(), "http 500: boom: database down") {
		t.Fatalf("error %v", err)
	}
	var he *HTTPError
	if !errors.As(err, &he) || he.StatusCode != 500 || len(he.Body) > errorExcerpt {
		t.Errorf("HTTPError %+v", he)
	}

	empty := httpSet(t, newRecorder(t, reply(503, "")), HTTPConfig{URL: "/x"}, Options{})
	if _, err := empty.Run(context.Background(), json.RawMessage(`{"id":"1"}`), "k"); err == nil || err.Error() != "http 503: Service Unavailable" {
		t.Errorf("empty body error %v", err)
	}
}

func TestHTTPRedirectNotFollowed(t *testing.T) {
	target := newRecorder(t, reply(200, "leaked"))
	srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/steal", http.StatusTemporaryRedirect)
	})
	tool := httpSet(t, srv, HTTPConfig{URL: "/x", Headers: map[string]string{"X-Api-Key": "k"}}, Options{})
	if _, err := tool.Run(context.Background(), json.RawMessage(`{"id":"1"}`), "k"); err == nil || !strings.HasPrefix(err.Error(), "http 307") {
		t.Errorf("redirect: %v", err)
	}
	if target.count() != 0 {
		t.Error("redirect followed")
	}
}

func TestHTTPTruncation(t *testing.T) {
	srv := newRecorder(t, reply(200, strings.Repeat("a", 99)+"é"+strings.Repeat("b", 500)))
	tool := httpSet(t, srv, HTTPConfig{URL: "/x"}, Options{MaxOutput: 100})
	out, err := tool.Run(context.Background(), json.RawMessage(`{"id":"1"}`), "k")
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Repeat("a", 99) + "\n[output truncated to 99 bytes]"
	if out != want {
		t.Errorf("result %q, want %q", out, want)
	}

	exact := httpSet(t, newRecorder(t, reply(200, strings.Repeat("c", 100))), HTTPConfig{URL: "/x"}, Options{MaxOutput: 100})
	if out, err := exact.Run(context.Background(), json.RawMessage(`{"id":"1"}`), "k"); err != nil || out != strings.Repeat("c", 100) {
		t.Errorf("exactly MaxOutput: %q, %v", out, err)
	}
}

func TestHTTPNetworkErrorAndContext(t *testing.T) {
	srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	})
	tool := httpSet(t, srv, HTTPConfig{URL: "/slow"}, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := tool.Run(ctx, json.RawMessage(`{"id":"1"}`), "k")
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Errorf("slow server: %v after %s", err, time.Since(start))
	}

	srv.Close()
	_, err = tool.Run(context.Background(), json.RawMessage(`{"id":"1"}`), "k")
	if err == nil || !strings.HasPrefix(err.Error(), "http request: ") {
		t.Errorf("closed server: %v", err)
	}
}

// Many runs of one HTTP tool at once, round after round, reuse the
// connections of the first round.
func TestHTTPKeepsConnectionsOfConcurrentRuns(t *testing.T) {
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	s := mustNew(t, []Config{{Name: "call", Parameters: itemSchema, HTTP: &HTTPConfig{URL: srv.URL + "/hook"}}}, Options{})
	tool := mustGet(t, s, "call")
	const runs, rounds = 24, 4
	for range rounds {
		var wg sync.WaitGroup
		for i := range runs {
			wg.Go(func() {
				if _, err := tool.Run(context.Background(), json.RawMessage(`{"id":"1"}`), fmt.Sprintf("k%d", i)); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}
	if n := conns.Load(); n > runs+runs/4 {
		t.Fatalf("%d rounds of %d concurrent runs opened %d connections, want about %d", rounds, runs, n, runs)
	}
}
