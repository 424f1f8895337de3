package tools

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// rawServer is a TCP server on 127.0.0.1 that hands each connection to
// handle; it counts the requests handlers report with got.
type rawServer struct {
	addr string
	reqs atomic.Int32
}

func (s *rawServer) got() { s.reqs.Add(1) }

func newRawServer(t *testing.T, handle func(s *rawServer, c net.Conn)) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{addr: ln.Addr().String()}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				handle(s, c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return s
}

// readRequest reads one whole HTTP request from c.
func readRequest(s *rawServer, c net.Conn) bool {
	req, err := http.ReadRequest(bufio.NewReader(c))
	if err != nil {
		return false
	}
	if _, err := io.Copy(io.Discard, req.Body); err != nil {
		return false
	}
	s.got()
	return true
}

// closedPort is an address on 127.0.0.1 where nothing listens.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func urlTool(t *testing.T, rawURL string, timeout time.Duration) Tool {
	t.Helper()
	s := mustNew(t, []Config{{Name: "call", HTTP: &HTTPConfig{URL: rawURL, Timeout: timeout}}}, Options{})
	return mustGet(t, s, "call")
}

const testTimeout = 300 * time.Millisecond

func TestHTTPOutcomeUnknownAfterTheRequestWasSent(t *testing.T) {
	silent := newRawServer(t, func(s *rawServer, c net.Conn) {
		if readRequest(s, c) {
			io.Copy(io.Discard, c) // never answers; ends when the client hangs up
		}
	})
	closes := newRawServer(t, func(s *rawServer, c net.Conn) {
		if readRequest(s, c) {
			c.Close()
		}
	})
	resets := newRawServer(t, func(s *rawServer, c net.Conn) {
		if readRequest(s, c) {
			c.(*net.TCPConn).SetLinger(0) // close with RST
			c.Close()
		}
	})
	shortBody := newRawServer(t, func(s *rawServer, c net.Conn) {
		if readRequest(s, c) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial")
			c.Close()
		}
	})
	var stalled atomic.Int32
	stall := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		stalled.Add(1)
		w.Header().Set("Content-Length", "100")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "first bytes")
		w.(http.Flusher).Flush()
		<-r.Context().Done() // the body never ends; the client gives up
	}))
	t.Cleanup(stall.Close)

	cases := []struct {
		name  string
		url   string
		count func() int32
		want  string // in the message
	}{
		{"no answer", "http://" + silent.addr + "/x", silent.reqs.Load, "outcome unknown: http request: no complete answer within 300ms: "},
		{"closed after reading", "http://" + closes.addr + "/x", closes.reqs.Load, "outcome unknown: http request: "},
		{"reset after reading", "http://" + resets.addr + "/x", resets.reqs.Load, "outcome unknown: http request: "},
		{"headers then a stalled body", stall.URL + "/x", stalled.Load, "outcome unknown: http response: no complete answer within 300ms: "},
		{"body cut short", "http://" + shortBody.addr + "/x", shortBody.reqs.Load, "outcome unknown: http response: connection closed after the request was sent: "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tool := urlTool(t, tc.url, testTimeout)
			_, err := tool.Run(context.Background(), json.RawMessage(`{"op":"restart"}`), "batch/#0")
			if !errors.Is(err, ErrOutcomeUnknown) {
				t.Fatalf("Run: %v; want ErrOutcomeUnknown", err)
			}
			if !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("error %q, want prefix %q", err, tc.want)
			}
			if n := tc.count(); n != 1 {
				t.Errorf("server got %d requests, want 1", n)
			}
		})
	}
}

func TestHTTPTimeoutAppliesWhateverTheContext(t *testing.T) {
	srv := newRawServer(t, func(s *rawServer, c net.Conn) {
		if readRequest(s, c) {
			io.Copy(io.Discard, c)
		}
	})
	tool := urlTool(t, "http://"+srv.addr+"/x", testTimeout)
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	_, err := tool.Run(ctx, json.RawMessage(`{}`), "k")
	if !errors.Is(err, ErrOutcomeUnknown) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "within 300ms") {
		t.Errorf("Run: %v; want the tool's 300ms timeout", err)
	}
}

func TestHTTPFailureBeforeSendingIsPlain(t *testing.T) {
	// TLS servers whose handshake fails or never ends: the request is never
	// written.
	var tlsReqs atomic.Int32
	untrusted := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { tlsReqs.Add(1) }))
	untrusted.Config.ErrorLog = log.New(io.Discard, "", 0)
	untrusted.StartTLS()
	t.Cleanup(untrusted.Close)
	plain := newRawServer(t, func(s *rawServer, c net.Conn) {
		io.WriteString(c, "HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n")
		c.Close()
	})
	alert := newRawServer(t, func(s *rawServer, c net.Conn) {
		c.Write([]byte{0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28}) // fatal alert: handshake_failure
		c.Close()
	})
	mute := newRawServer(t, func(s *rawServer, c net.Conn) {
		io.Copy(io.Discard, c) // reads the ClientHello, never answers
	})

	cases := []struct {
		name  string
		url   string
		check func(error) bool
	}{
		{"connection refused", "http://" + closedPort(t) + "/x", func(err error) bool {
			var op *net.OpError
			return errors.As(err, &op) && op.Op == "dial"
		}},
		{"no such host", "http://nonexistent.invalid/x", func(err error) bool {
			var dns *net.DNSError
			return errors.As(err, &dns)
		}},
		{"untrusted certificate", untrusted.URL + "/x", func(error) bool { return tlsReqs.Load() == 0 }},
		{"not TLS", "https://" + plain.addr + "/x", func(error) bool { return true }},
		{"handshake alert", "https://" + alert.addr + "/x", func(err error) bool {
			return strings.Contains(err.Error(), "tls: handshake failure")
		}},
		{"handshake never ends", "https://" + mute.addr + "/x", func(err error) bool {
			return errors.Is(err, context.DeadlineExceeded) && strings.Contains(err.Error(), "http request: nothing sent within 300ms: ")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tool := urlTool(t, tc.url, testTimeout)
			_, err := tool.Run(context.Background(), json.RawMessage(`{}`), "k")
			if err == nil || errors.Is(err, ErrOutcomeUnknown) {
				t.Fatalf("Run: %v; want a plain failure", err)
			}
			if !strings.HasPrefix(err.Error(), "http request: ") || !tc.check(err) {
				t.Errorf("error %q (%T)", err, errors.Unwrap(err))
			}
		})
	}
}

func TestHTTPAnswerIsNotUnknown(t *testing.T) {
	srv := newRecorder(t, reply(http.StatusConflict, "already restarting"))
	tool := urlTool(t, srv.URL+"/x", testTimeout)
	_, err := tool.Run(context.Background(), json.RawMessage(`{}`), "k")
	var he *HTTPError
	if !errors.As(err, &he) || errors.Is(err, ErrOutcomeUnknown) {
		t.Errorf("409: %v; want a plain *HTTPError", err)
	}
}

func TestHTTPErrorsHideURLSecrets(t *testing.T) {
	secrets := []string{"pass", "sk-live-123456", "api_key=", "frag"}
	check := func(t *testing.T, err error) {
		t.Helper()
		if err == nil {
			t.Fatal("no error")
		}
		for _, s := range secrets {
			if strings.Contains(err.Error(), s) {
				t.Errorf("error %q contains %q", err, s)
			}
		}
	}

	// Refused: nothing listens.
	addr := closedPort(t)
	tool := urlTool(t, "http://user:pass@"+addr+"/x?api_key=sk-live-123456#frag", testTimeout)
	_, err := tool.Run(context.Background(), json.RawMessage(`{}`), "k")
	check(t, err)
	if want := `http request: Post "http://` + addr + `/x": `; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %q, want prefix %q", err, want)
	}

	// Timed out after sending.
	silent := newRawServer(t, func(s *rawServer, c net.Conn) {
		if readRequest(s, c) {
			io.Copy(io.Discard, c)
		}
	})
	tool = urlTool(t, "http://user:pass@"+silent.addr+"/x?api_key=sk-live-123456", testTimeout)
	_, err = tool.Run(context.Background(), json.RawMessage(`{}`), "k")
	check(t, err)
	if !errors.Is(err, ErrOutcomeUnknown) {
		t.Errorf("error %v; want unknown", err)
	}

	// Refused at validation: an empty path value.
	tool = urlTool(t, "http://user:pass@"+addr+"/items/{{.id}}?api_key=sk-live-123456", testTimeout)
	err = tool.Validate(json.RawMessage(`{"id":""}`))
	check(t, err)
	if !errors.Is(err, ErrInvalidArgs) || err.Error() != "invalid arguments: url: empty value in the URL path" {
		t.Errorf("Validate: %v", err)
	}

	// A server that echoes the URL in its error body.
	echo := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, "bad request to http://user:pass@"+r.Host+r.RequestURI)
	})
	tool = urlTool(t, strings.Replace(echo.URL, "http://", "http://user:pass@", 1)+"/x?api_key=sk-live-123456", testTimeout)
	_, err = tool.Run(context.Background(), json.RawMessage(`{}`), "k")
	check(t, err)
	if got := echo.last(t); got.header.Get("Authorization") != "Basic dXNlcjpwYXNz" || got.query["api_key"][0] != "sk-live-123456" {
		t.Errorf("request: authorization %q, query %v", got.header.Get("Authorization"), got.query)
	}
}

func TestHTTPURLCheckedAtValidation(t *testing.T) {
	srv := newRecorder(t, reply(200, "ok"))
	tool := urlTool(t, srv.URL+"/items/{{.id}}?q={{.q}}", testTimeout)
	for _, args := range []string{`{"q":"x"}`, `{"id":"","q":"x"}`, `{"id":"..","q":"x"}`, `{"id":"a/../..","q":"x"}`, `{"id":"a"}`} {
		if err := tool.Validate(json.RawMessage(args)); !errors.Is(err, ErrInvalidArgs) {
			t.Errorf("Validate(%s): %v; want invalid arguments", args, err)
		}
		if _, err := tool.Run(context.Background(), json.RawMessage(args), "k"); !errors.Is(err, ErrInvalidArgs) {
			t.Errorf("Run(%s): %v; want invalid arguments", args, err)
		}
	}
	if err := tool.Validate(json.RawMessage(`{"id":"a","q":""}`)); err != nil {
		t.Errorf("Validate: %v", err)
	}
	if n := srv.count(); n != 0 {
		t.Errorf("%d requests sent", n)
	}
}

func TestHTTPTimeoutDefault(t *testing.T) {
	s := mustNew(t, []Config{{Name: "a", HTTP: &HTTPConfig{URL: "http://h/"}}, {Name: "b", HTTP: &HTTPConfig{URL: "http://h/", Timeout: time.Second}}}, Options{})
	for name, want := range map[string]time.Duration{"a": DefaultTimeout, "b": time.Second} {
		if got := mustGet(t, s, name).(*configTool).exec.(*httpExecutor).timeout; got != want {
			t.Errorf("%s: timeout %s, want %s", name, got, want)
		}
	}
}
