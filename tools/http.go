package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"text/template"
	"text/template/parse"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/airlockhq/airlock/keyerr"
	"github.com/airlockhq/airlock/redact"
)

// errorExcerpt is how many bytes of a failed response's body an error keeps.
const errorExcerpt = 500

// HTTPError is a non-2xx answer of an http tool.
type HTTPError struct {
	StatusCode int
	Body       string // an excerpt
}

func (e *HTTPError) Error() string {
	body := e.Body
	if body == "" {
		body = http.StatusText(e.StatusCode)
	}
	return fmt.Sprintf("http %d: %s", e.StatusCode, body)
}

var validMethods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodPut: true,
	http.MethodPatch: true, http.MethodDelete: true, http.MethodOptions: true,
}

// httpExecutor is the `http` executor.
type httpExecutor struct {
	method    string
	url       *template.Template
	origin    *url.URL // scheme, userinfo and host, literal in the config
	headers   map[string]string
	timeout   time.Duration
	client    *http.Client
	maxOutput int
	redact    *redact.Redactor
	whole     int // as execExecutor's
}

// method is the configured method, POST when unset.
func (cfg *HTTPConfig) method() string {
	if cfg.Method == "" {
		return http.MethodPost
	}
	return strings.ToUpper(cfg.Method)
}

// Validate checks the executor's keys; key is its place, e.g.
// "tools[2].http". The URL template is checked when New compiles it.
func (cfg *HTTPConfig) Validate(key string) error {
	if !validMethods[cfg.method()] {
		return keyerr.New(key+".method", "invalid %q", cfg.Method)
	}
	if cfg.URL == "" {
		return keyerr.New(key+".url", "required")
	}
	if cfg.Timeout < 0 {
		return keyerr.New(key+".timeout", "must not be negative")
	}
	return ValidateHeaders(key+".headers", cfg.Headers)
}

// ValidateHeaders checks configured HTTP headers (key names the map, e.g.
// "tools[0].http.headers"): each name an HTTP token, each value without a
// line break or NUL.
func ValidateHeaders(key string, headers map[string]string) error {
	for _, name := range slices.Sorted(maps.Keys(headers)) {
		if !httpguts.ValidHeaderFieldName(name) {
			return keyerr.New(key, "invalid name %q", name)
		}
		if strings.ContainsAny(headers[name], "\r\n\x00") {
			return keyerr.New(key+"."+name, "invalid value: control character")
		}
	}
	return nil
}

// newHTTPExecutor compiles an executor that Validate accepted.
func newHTTPExecutor(key string, cfg *HTTPConfig, opts Options) (*httpExecutor, error) {
	h := &httpExecutor{
		method:    cfg.method(),
		headers:   make(map[string]string, len(cfg.Headers)),
		timeout:   cfg.Timeout,
		client:    opts.HTTPClient,
		maxOutput: opts.MaxOutput,
		redact:    opts.Redactor,
	}
	tmpl, origin, err := parseURLTemplate(cfg.URL)
	if err != nil {
		return nil, keyerr.Wrap(key+".url", err)
	}
	h.url, h.origin = tmpl, origin
	if cfg.Timeout == 0 {
		h.timeout = DefaultTimeout
	}
	for name, value := range cfg.Headers {
		h.headers[http.CanonicalHeaderKey(name)] = value
	}
	return h, nil
}

func (h *httpExecutor) check(data map[string]any) error {
	_, err := h.renderURL(data)
	return err
}

func (h *httpExecutor) run(ctx context.Context, body []byte, data map[string]any, idempotencyKey string) (string, error) {
	u, err := h.renderURL(data)
	if err != nil {
		return "", err
	}
	runCtx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	// sent is set once any of the request may have left: from then on a
	// failure leaves the outcome unknown. Retries inside the transport
	// (e.g. on a reused connection) keep it set.
	var sent atomic.Bool
	mark := func() { sent.Store(true) }
	trace := &httptrace.ClientTrace{
		WroteHeaderField:     func(string, []string) { mark() },
		WroteHeaders:         mark,
		WroteRequest:         func(httptrace.WroteRequestInfo) { mark() },
		GotFirstResponseByte: mark,
	}
	withBody := h.method != http.MethodGet && h.method != http.MethodHead
	var rd io.Reader
	if withBody {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(runCtx, trace), h.method, u, rd)
	if err != nil {
		return "", fmt.Errorf("new request: %w", stripErrorURLs(err))
	}
	for name, value := range h.headers {
		if name == "Host" {
			req.Host = value
			continue
		}
		req.Header.Set(name, value)
	}
	if withBody && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if idempotencyKey != "" {
		req.Header.Set("Idempotency-Key", idempotencyKey)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return "", h.failure(ctx, runCtx, sent.Load(), "http request", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		// Read past the excerpt by the longest secret, so one crossing
		// the cut is seen whole and scrubbed, not left in part.
		b, _ := io.ReadAll(io.LimitReader(resp.Body, int64(errorExcerpt+h.redact.MaxLen())))
		return "", &HTTPError{StatusCode: resp.StatusCode, Body: redact.URLs(strings.TrimSpace(h.redact.Prefix(string(b), errorExcerpt)))}
	}
	read := max(h.maxOutput, h.whole) + h.redact.MaxLen()
	b, err := io.ReadAll(io.LimitReader(resp.Body, int64(read)+1))
	if err != nil {
		return "", h.failure(ctx, runCtx, true, "http response", err)
	}
	total := int64(len(b))
	if len(b) > read {
		total = -1 // more than kept, size unknown
	}
	if h.whole > 0 {
		return wholeOutput(b, total, h.whole, h.redact)
	}
	return truncateOutput(b, h.maxOutput, total, h.redact), nil
}

// failure is the error of a run that failed in op: an ordinary error while
// nothing was sent, else one wrapping ErrOutcomeUnknown. ctx is the caller's
// context, runCtx the one bounded by the tool's timeout.
func (h *httpExecutor) failure(ctx, runCtx context.Context, sent bool, op string, err error) error {
	err = stripErrorURLs(err)
	timedOut := ctx.Err() == nil && errors.Is(runCtx.Err(), context.DeadlineExceeded)
	if !sent {
		if timedOut {
			return fmt.Errorf("%s: nothing sent within %s: %w", op, h.timeout, err)
		}
		return fmt.Errorf("%s: %w", op, err)
	}
	var what string
	switch {
	case timedOut:
		what = fmt.Sprintf("no complete answer within %s", h.timeout)
	case ctx.Err() != nil:
		what = "context ended after the request was sent"
	case errors.Is(err, syscall.ECONNRESET):
		what = "connection reset after the request was sent"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		what = "connection closed after the request was sent"
	default:
		what = "failed after the request was sent"
	}
	return fmt.Errorf("%w: %s: %s: %w", ErrOutcomeUnknown, op, what, err)
}

// stripErrorURLs removes the userinfo, query and fragment from the URL of
// every *url.Error in err's chain, in place, and returns err.
func stripErrorURLs(err error) error {
	switch e := err.(type) {
	case *url.Error:
		e.URL = safeURL(e.URL)
		stripErrorURLs(e.Err)
	case interface{ Unwrap() error }:
		stripErrorURLs(e.Unwrap())
	case interface{ Unwrap() []error }:
		for _, e := range e.Unwrap() {
			stripErrorURLs(e)
		}
	}
	return err
}

// safeURL is raw without its userinfo, query and fragment, for messages.
func safeURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		if i := strings.IndexAny(raw, "?#"); i >= 0 {
			raw = raw[:i]
		}
		return redact.URLs(raw)
	}
	u.User = nil
	u.RawQuery, u.ForceQuery = "", false
	u.Fragment, u.RawFragment = "", ""
	return u.String()
}

// urlValueError is a value an escaping function refuses.
type urlValueError struct{ msg string }

func (e *urlValueError) Error() string { return e.msg }

// renderURL renders the URL template; every substituted value was escaped by
// the functions parseURLTemplate appended to each action. Every error wraps
// ErrInvalidArgs and quotes no userinfo, query or fragment.
func (h *httpExecutor) renderURL(data map[string]any) (string, error) {
	var b strings.Builder
	if err := h.url.Execute(&b, data); err != nil {
		if ve := (*urlValueError)(nil); errors.As(err, &ve) {
			return "", fmt.Errorf("%w: url: %w", ErrInvalidArgs, ve)
		}
		return "", fmt.Errorf("%w: url: %w", ErrInvalidArgs, err)
	}
	rendered := b.String()
	u, err := url.Parse(rendered)
	if err != nil {
		return "", fmt.Errorf("%w: url: %w", ErrInvalidArgs, stripErrorURLs(err))
	}
	if u.Scheme != h.origin.Scheme || u.Host != h.origin.Host || u.User.String() != h.origin.User.String() {
		return "", fmt.Errorf("%w: url: rendered %q leaves %s://%s", ErrInvalidArgs, safeURL(rendered), h.origin.Scheme, h.origin.Host)
	}
	for _, seg := range strings.Split(u.Path, "/") {
		if seg == "." || seg == ".." {
			return "", fmt.Errorf("%w: url: dot segment in path %q", ErrInvalidArgs, u.Path)
		}
	}
	return rendered, nil
}

// Names of the escaping functions appended to every action of a URL template.
const (
	urlPathFunc  = "airlock_url_path"
	urlQueryFunc = "airlock_url_query"
)

// parseURLTemplate parses a URL template whose scheme and host are literal
// text, and appends an escaping function to every action that prints: a
// substituted value can't add a path segment, a query parameter or a
// fragment. In the path, a value may not be empty, "." or "..".
func parseURLTemplate(text string) (*template.Template, *url.URL, error) {
	funcs := template.FuncMap{urlPathFunc: urlPathValue, urlQueryFunc: urlQueryValue}
	for k, v := range templateFuncs {
		funcs[k] = v
	}
	tmpl, err := template.New("url").Funcs(funcs).Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, nil, err
	}
	if len(tmpl.Templates()) > 1 {
		return nil, nil, errors.New("define and block are not supported")
	}
	origin, err := literalOrigin(tmpl.Tree.Root)
	if err != nil {
		return nil, nil, err
	}
	if _, err := escapeActions(tmpl.Tree.Root, false); err != nil {
		return nil, nil, err
	}
	return tmpl, origin, nil
}

// literalOrigin checks that the template starts with "http(s)://host" (or
// "http(s)://userinfo@host") as literal text, ended by "/", "?" or "#" (or
// the end of the template).
func literalOrigin(root *parse.ListNode) (*url.URL, error) {
	const msg = "must start with a literal http:// or https:// scheme and host"
	if root == nil || len(root.Nodes) == 0 {
		return nil, errors.New(msg)
	}
	first, ok := root.Nodes[0].(*parse.TextNode)
	if !ok {
		return nil, errors.New(msg)
	}
	text := string(first.Text)
	lower := strings.ToLower(text)
	if !strings.HasPrefix(lower, "http://") && !strings.HasPrefix(lower, "https://") {
		return nil, errors.New(msg)
	}
	start := strings.Index(text, "://") + 3
	end := strings.IndexAny(text[start:], "/?#")
	switch {
	case end >= 0:
		end += start
	case len(root.Nodes) == 1:
		end = len(text)
	default:
		return nil, errors.New(msg)
	}
	u, err := url.Parse(text[:end])
	if err != nil {
		return nil, err
	}
	if u.Host == "" {
		return nil, errors.New(msg)
	}
	return u, nil
}

// escapeActions appends the escaping function to each printing action under
// n, in order; inQuery is whether a "?" or "#" came before in literal text.
// It returns whether one has come after n.
func escapeActions(n parse.Node, inQuery bool) (bool, error) {
	switch n := n.(type) {
	case nil:
		return inQuery, nil
	case *parse.ListNode:
		if n == nil {
			return inQuery, nil
		}
		for _, c := range n.Nodes {
			var err error
			if inQuery, err = escapeActions(c, inQuery); err != nil {
				return false, err
			}
		}
		return inQuery, nil
	case *parse.TextNode:
		return inQuery || bytes.ContainsAny(n.Text, "?#"), nil
	case *parse.ActionNode:
		if len(n.Pipe.Decl) > 0 {
			return inQuery, nil // an assignment prints nothing
		}
		fn := urlPathFunc
		if inQuery {
			fn = urlQueryFunc
		}
		n.Pipe.Cmds = append(n.Pipe.Cmds, &parse.CommandNode{
			NodeType: parse.NodeCommand,
			Pos:      n.Pos,
			Args:     []parse.Node{parse.NewIdentifier(fn).SetPos(n.Pos)},
		})
		return inQuery, nil
	case *parse.IfNode:
		return escapeBranch(&n.BranchNode, inQuery)
	case *parse.RangeNode:
		return escapeBranch(&n.BranchNode, inQuery)
	case *parse.WithNode:
		return escapeBranch(&n.BranchNode, inQuery)
	case *parse.TemplateNode:
		return false, errors.New("template calls are not supported")
	default: // comments, break, continue
		return inQuery, nil
	}
}

// escapeBranch escapes both branches; after it, a value counts as in the
// query only when both branches end there.
func escapeBranch(b *parse.BranchNode, inQuery bool) (bool, error) {
	q1, err := escapeActions(b.List, inQuery)
	if err != nil {
		return false, err
	}
	q2, err := escapeActions(b.ElseList, inQuery)
	if err != nil {
		return false, err
	}
	return q1 && q2, nil
}

func urlPathValue(v any) (string, error) {
	s := urlText(v)
	switch s {
	case "":
		return "", &urlValueError{"empty value in the URL path"}
	case ".", "..":
		return "", &urlValueError{fmt.Sprintf("value %q not allowed in the URL path", s)}
	}
	return escapeURLValue(s), nil
}

func urlQueryValue(v any) (string, error) { return escapeURLValue(urlText(v)), nil }

// urlText is a value as text before escaping.
func urlText(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case json.Number:
		return v.String()
	case bool:
		return strconv.FormatBool(v)
	case fmt.Stringer:
		return v.String()
	default:
		return fmt.Sprint(v)
	}
}

// escapeURLValue percent-encodes every byte but the unreserved characters of
// RFC 3986, so the value is data wherever it stands in a URL: it can't add a
// path segment ("/"), a query ("?", "&", "="), a fragment ("#") or change
// userinfo or port ("@", ":").
func escapeURLValue(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// truncateOutput scrubs out with r, then keeps at most max bytes of it, cut
// at a rune boundary and never inside a secret, and notes a cut. total is
// the size of the whole output, -1 when unknown. When out is not all of it,
// out must hold at least max+r.MaxLen() bytes (see redact.Prefix).
func truncateOutput(out []byte, max int, total int64, r *redact.Redactor) string {
	if total >= 0 && total == int64(len(out)) {
		if s := r.String(string(out)); len(s) <= max {
			return s
		}
	}
	kept := r.Prefix(string(out), max)
	if total < 0 {
		return fmt.Sprintf("%s\n[output truncated to %d bytes]", kept, len(kept))
	}
	return fmt.Sprintf("%s\n[output truncated: kept %d of %d bytes]", kept, len(kept), total)
}

// wholeOutput is a preview's whole output, scrubbed; total is its size
// (-1: more than out holds). An output longer than whole is
// ErrPreviewTooLarge: a preview is never bound to a part of its output.
func wholeOutput(out []byte, total int64, whole int, r *redact.Redactor) (string, error) {
	if total < 0 || total > int64(whole) {
		return "", fmt.Errorf("%w: more than %d bytes", ErrPreviewTooLarge, whole)
	}
	return r.String(string(out)), nil
}
