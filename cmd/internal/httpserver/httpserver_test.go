package httpserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

type fakePinger struct{ err error }

func (f fakePinger) Ping(context.Context) error { return f.err }

func TestHealthAndReadiness(t *testing.T) {
	for _, tc := range []struct {
		name      string
		db        fakePinger
		readyCode int
	}{
		{"database up", fakePinger{}, 200},
		{"database down", fakePinger{errors.New("connection refused")}, 503},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(Handler(tc.db, nil))
			defer srv.Close()
			for path, want := range map[string]int{"/healthz": 200, "/readyz": tc.readyCode} {
				resp, err := http.Get(srv.URL + path)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != want {
					t.Fatalf("%s: %d, want %d", path, resp.StatusCode, want)
				}
			}
		})
	}
}

func TestHTTPServerLimits(t *testing.T) {
	limits := DefaultLimits
	limits.ReadHeader, limits.Read = 300*time.Millisecond, 300*time.Millisecond
	srv := New(Handler(fakePinger{}, nil), limits)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	// A client that sends headers slowly and never finishes is cut off.
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprint(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n")
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 512)
	if _, err := conn.Read(buf); err == nil {
		// The server may answer 408 before closing; the next read must end.
		if _, err := conn.Read(buf); err == nil {
			t.Fatal("the connection of a client that never finished its headers stayed open")
		}
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the server kept a slow client's connection open for 10s")
	}

	// Oversized headers are refused.
	req, _ := http.NewRequest("GET", "http://"+ln.Addr().String()+"/healthz", nil)
	req.Header.Set("X-Big", strings.Repeat("a", 2*DefaultLimits.MaxHeaderBytes))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("status %d for oversized headers, want 431", resp.StatusCode)
	}
	if DefaultLimits.Read <= 0 || DefaultLimits.Write <= 0 || DefaultLimits.Idle <= 0 {
		t.Fatal("the server runs without read, write or idle timeouts")
	}
}
