package mcptools

import (
	"bytes"
	"context"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockhq/airlock/redact"
)

// methodCallTool is the MCP method of a tool call.
const methodCallTool = "tools/call"

// stopGrace is how long a stdio server has to exit once its stdin is closed,
// then again after SIGTERM, before SIGKILL.
const stopGrace = 2 * time.Second

// maxStderrLine is how many bytes of one stderr line are logged.
const maxStderrLine = 2000

// callState records whether a tools/call request may have reached the
// server: from then on a failure leaves the outcome unknown.
type callState struct{ sent atomic.Bool }

type callStateKey struct{}

// withCallState returns a context for one CallTool that records in st when
// the request leaves: over HTTP once any of the request was written (an
// httptrace hook, as the http executor does), over a stream once the
// request's line was written whole (trackConn).
func withCallState(ctx context.Context) (context.Context, *callState) {
	st := &callState{}
	mark := func() { st.sent.Store(true) }
	trace := &httptrace.ClientTrace{
		WroteHeaderField:     func(string, []string) { mark() },
		WroteHeaders:         mark,
		WroteRequest:         func(httptrace.WroteRequestInfo) { mark() },
		GotFirstResponseByte: mark,
	}
	ctx = context.WithValue(ctx, callStateKey{}, st)
	return httptrace.WithClientTrace(ctx, trace), st
}

// trackTransport wraps a stream transport (stdio, in-memory) so that a
// tools/call written to the stream marks its call as sent. Not for the
// streamable HTTP transport, whose connection the SDK must see unwrapped.
type trackTransport struct {
	mcp.Transport
	onClose func() // after the connection closed, e.g. flush stderr
}

func (t *trackTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &trackConn{Connection: c, onClose: t.onClose}, nil
}

type trackConn struct {
	mcp.Connection
	onClose   func()
	closeOnce sync.Once
}

func (c *trackConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	err := c.Connection.Write(ctx, msg)
	// A failed write delivered no whole line: the server can't have read the
	// request. A successful one may have been read.
	if err == nil {
		if req, ok := msg.(*jsonrpc.Request); ok && req.Method == methodCallTool {
			if st, ok := ctx.Value(callStateKey{}).(*callState); ok {
				st.sent.Store(true)
			}
		}
	}
	return err
}

func (c *trackConn) Close() error {
	err := c.Connection.Close()
	if c.onClose != nil {
		c.closeOnce.Do(c.onClose)
	}
	return err
}

// commandTransport starts the stdio server: its environment is PATH and
// HOME from ours plus the configured env, nothing else; its stderr lines go
// to log, scrubbed by r.
func commandTransport(cfg Config, log *slog.Logger, r *redact.Redactor) mcp.Transport {
	cmd := exec.Command(cfg.Command[0], cfg.Command[1:]...)
	cmd.Env = cleanEnv(cfg.Env)
	stderr := &lineLogger{log: log, redact: r}
	cmd.Stderr = stderr
	cmd.WaitDelay = stopGrace
	return &trackTransport{
		Transport: &mcp.CommandTransport{Command: cmd, TerminateDuration: stopGrace},
		onClose:   stderr.flush,
	}
}

// cleanEnv is PATH and HOME from the environment (unless configured) and the
// configured variables, sorted.
func cleanEnv(extra map[string]string) []string {
	var env []string
	for _, k := range []string{"PATH", "HOME"} {
		if _, set := extra[k]; set {
			continue
		}
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		env = append(env, k+"="+extra[k])
	}
	return env
}

// lineLogger logs each line written to it, scrubbed by redact, then cut
// at maxStderrLine bytes.
type lineLogger struct {
	log    *slog.Logger
	redact *redact.Redactor

	mu   sync.Mutex
	buf  []byte
	over bool // the current line was cut: drop the rest
}

func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if !l.over {
			// Kept past the cut by the longest secret, so that one
			// crossing it is scrubbed whole (emit).
			room := maxStderrLine + l.redact.MaxLen() - len(l.buf)
			if len(chunk) > room {
				l.buf = append(l.buf, chunk[:room]...)
				l.over = true
			} else {
				l.buf = append(l.buf, chunk...)
			}
		}
		if i < 0 {
			break
		}
		l.emit()
		p = p[i+1:]
	}
	return n, nil
}

// emit logs the buffered line; the caller holds mu.
func (l *lineLogger) emit() {
	line := strings.TrimRight(string(l.buf), "\r")
	cut := l.over || len(line) > maxStderrLine
	line = l.redact.Prefix(line, maxStderrLine)
	if cut {
		line += " [cut]"
	}
	l.buf, l.over = l.buf[:0], false
	if strings.TrimSpace(line) != "" {
		l.log.Info("mcp server stderr", "line", strings.ToValidUTF8(line, "\uFFFD"))
	}
}

// flush logs a last line that had no newline.
func (l *lineLogger) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > 0 || l.over {
		l.emit()
	}
}

// httpClient is the client of a streamable HTTP server: it adds the
// configured headers and follows no redirect, so they never go to another
// host.
func httpClient(headers map[string]string) *http.Client {
	base := http.DefaultTransport.(*http.Transport).Clone()
	h := make(http.Header, len(headers))
	host := ""
	for k, v := range headers {
		if http.CanonicalHeaderKey(k) == "Host" {
			host = v
			continue
		}
		h.Set(k, v)
	}
	return &http.Client{
		Transport:     &headerTransport{base: base, headers: h, host: host},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

type headerTransport struct {
	base    http.RoundTripper
	headers http.Header
	host    string
}

// RoundTrip adds the configured headers the SDK has not set itself: the
// protocol's own (Accept, Content-Type, Mcp-*) can't be overridden.
func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.headers) > 0 || t.host != "" {
		req = req.Clone(req.Context())
		for k, vs := range t.headers {
			if req.Header.Get(k) == "" {
				req.Header[k] = vs
			}
		}
		if t.host != "" {
			req.Host = t.host
		}
	}
	return t.base.RoundTrip(req)
}
