package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/cmd/internal/httpserver"
	"github.com/airlockhq/airlock/config"
)

// runHealth runs `airlock health args...` through run, as the binary does.
func runHealth(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), append([]string{"health"}, args...), strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

// oneReasonLine checks that a failure says why on exactly one line.
func oneReasonLine(t *testing.T, stderr string, want ...string) {
	t.Helper()
	if strings.Count(stderr, "\n") != 1 || !strings.HasSuffix(stderr, "\n") {
		t.Errorf("stderr is not one line: %q", stderr)
	}
	if !strings.HasPrefix(stderr, "airlock health: unhealthy: ") {
		t.Errorf("stderr = %q, want it to start with %q", stderr, "airlock health: unhealthy: ")
	}
	for _, w := range want {
		if !strings.Contains(stderr, w) {
			t.Errorf("stderr = %q, want it to contain %q", stderr, w)
		}
	}
}

func TestHealthOK(t *testing.T) {
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Method + " " + r.URL.Path
		w.Write([]byte("ready\n"))
	}))
	defer srv.Close()
	code, stdout, stderr := runHealth(t, "-url", srv.URL+"/readyz")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q; want 0", code, stderr)
	}
	if got != "GET /readyz" {
		t.Errorf("server saw %q, want GET /readyz", got)
	}
	if !strings.Contains(stdout, "200 OK") || stderr != "" {
		t.Errorf("stdout %q, stderr %q", stdout, stderr)
	}
}

// The real readiness handler: 200 while the database answers, 503 (with
// the reason in the body) when it does not.
func TestHealthAgainstReadyz(t *testing.T) {
	db := &healthPinger{}
	srv := httptest.NewServer(httpserver.Handler(db, nil))
	defer srv.Close()
	if code, _, stderr := runHealth(t, "-url", srv.URL+"/readyz"); code != 0 {
		t.Fatalf("ready database: exit %d, stderr %q", code, stderr)
	}
	db.err = context.DeadlineExceeded
	code, stdout, stderr := runHealth(t, "-url", srv.URL+"/readyz")
	if code != 1 {
		t.Fatalf("database down: exit %d, want 1", code)
	}
	if stdout != "" {
		t.Errorf("stdout = %q, want nothing", stdout)
	}
	oneReasonLine(t, stderr, "503 Service Unavailable", "database unavailable")
	if code, _, stderr := runHealth(t, "-url", srv.URL+"/healthz"); code != 0 {
		t.Fatalf("/healthz: exit %d, stderr %q", code, stderr)
	}
}

type healthPinger struct{ err error }

func (p *healthPinger) Ping(context.Context) error { return p.err }

func TestHealth503(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "database unavailable\nsecond line\x1b[31m", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	code, _, stderr := runHealth(t, "-url", srv.URL+"/readyz")
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	oneReasonLine(t, stderr, "503", "database unavailable", srv.URL+"/readyz")
	if strings.Contains(stderr, "second line") {
		t.Errorf("stderr = %q: only the body's first line belongs in the reason", stderr)
	}
}

func TestHealthClosedPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	start := time.Now()
	code, _, stderr := runHealth(t, "-url", "http://"+addr+"/readyz")
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	oneReasonLine(t, stderr, addr, "refused")
	if d := time.Since(start); d > healthTimeout {
		t.Errorf("took %s", d)
	}
}

func TestHealthTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	start := time.Now()
	code, _, stderr := runHealth(t, "-url", srv.URL+"/readyz", "-timeout", "200ms")
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	oneReasonLine(t, stderr, "no answer within 200ms")
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %s, want about 200ms", d)
	}
}

func TestHealthRedirectIsUnhealthy(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ok" {
			return
		}
		http.Redirect(w, r, "/ok", http.StatusFound)
	}))
	defer srv.Close()
	code, _, stderr := runHealth(t, "-url", srv.URL+"/readyz")
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	oneReasonLine(t, stderr, "302")
}

// Every failure exits 1, never 2: Docker reserves a health check's exit 2.
func TestHealthBadUsageExitsOne(t *testing.T) {
	for _, args := range [][]string{
		{"-url", "127.0.0.1:8080/readyz"},
		{"-url", "ftp://127.0.0.1/readyz"},
		{"-url", "http:///readyz"},
		{"-timeout", "0s"},
		{"-nosuchflag"},
		{"http://127.0.0.1:8080/readyz"},
	} {
		if code, _, stderr := runHealth(t, args...); code != 1 || stderr == "" {
			t.Errorf("health %q: exit %d, stderr %q; want 1 with a reason", args, code, stderr)
		}
	}
	if code, _, _ := runHealth(t, "-h"); code != 0 {
		t.Errorf("health -h: exit %d, want 0", code)
	}
}

// The default URL is the readiness endpoint on the default listen address,
// as the image's HEALTHCHECK expects.
func TestHealthDefaultURL(t *testing.T) {
	u, err := url.Parse(defaultHealthURL)
	if err != nil {
		t.Fatal(err)
	}
	_, port, err := net.SplitHostPort(config.DefaultListen)
	if err != nil {
		t.Fatal(err)
	}
	if u.Hostname() != "127.0.0.1" || u.Port() != port || u.Path != "/readyz" {
		t.Errorf("default URL %s: want http://127.0.0.1:%s/readyz (config.DefaultListen %q)", defaultHealthURL, port, config.DefaultListen)
	}
	if healthTimeout != 3*time.Second {
		t.Errorf("timeout %s, want 3s", healthTimeout)
	}
}

func TestHealthInUsage(t *testing.T) {
	if !strings.Contains(usage, "airlock health") {
		t.Error("usage does not list airlock health")
	}
}
