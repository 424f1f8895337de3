package mcptools

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"text/template"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockhq/airlock/redact"
	"github.com/airlockhq/airlock/tools"
)

// Timings of the servers' connections. Variables so tests can shorten them.
var (
	// readyAfter is when Ready turns true even if a server is still trying.
	readyAfter = 15 * time.Second
	// connectTimeout bounds connecting and listing the tools.
	connectTimeout = 30 * time.Second
	// minBackoff and maxBackoff bound the wait before reconnecting; it
	// doubles after each failure.
	minBackoff = time.Second
	maxBackoff = time.Minute
	// sessionWait is how long a call waits for a server that is
	// reconnecting, within its timeout.
	sessionWait = 10 * time.Second
)

// Limits on what a server lists.
const (
	maxListPages = 100
	maxTools     = 1000
)

// Info describes one MCP tool in the set, for a listing.
type Info struct {
	Name        string // as the model sees it: <server>__<tool>
	Server      string
	Tool        string // the server's name for it
	Title       string // the tool's title, else its annotations' title
	Description string // the server's description, without the prefix
	// ReadOnlyHint and DestructiveHint are the server's annotations, as
	// given: untrusted unless trust_annotations. An absent destructiveHint
	// counts as true (MCP's default) unless the tool is read-only.
	ReadOnlyHint    bool
	DestructiveHint bool
	// Gated is the tool's confirm flag (Tool.Confirm) and Why says where it
	// comes from. The confirmation policy may still ask for an ungated
	// tool (confirmation.tools, rules).
	Gated bool
	Why   string
}

// ServerStatus is the state of one configured server.
type ServerStatus struct {
	Name      string
	Connected bool
	Tools     int   // tools it has in the set
	Err       error // why its last attempt failed or its connection dropped; nil when connected
}

// Manager runs the configured MCP servers and keeps their tools in a set.
type Manager struct {
	set    *tools.Set
	log    *slog.Logger
	redact *redact.Redactor // scrubs results and stderr lines before they are cut
	asker  Asker            // answers the servers' questions; nil: none asked

	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	servers []*server

	ready     chan struct{}
	readyOnce sync.Once
	pendingMu sync.Mutex
	pending   int
}

// dialFunc makes a fresh transport for one connection attempt (tests); nil
// means the configured one.
type dialFunc func(cfg Config, log *slog.Logger) (mcp.Transport, error)

// Start connects to the servers concurrently and returns at once. Each
// server's tools are added to set as they are listed; a server that can't be
// reached is logged with its name and error, lacks tools in the set and is
// tried again with backoff, as is one whose connection drops. The servers'
// processes and connections end when ctx ends or on Close.
func Start(ctx context.Context, cfgs []Config, set *tools.Set, log *slog.Logger, opts ...Option) *Manager {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	return startWith(ctx, cfgs, set, log, nil, o)
}

// Option is an option of Start.
type Option func(*options)

type options struct {
	redact *redact.Redactor
	asker  Asker
}

// WithRedactor scrubs the servers' results, and the stderr lines logged,
// with r before they are cut (so no secret is left in part at the cut),
// after joining a result's parts (so a secret split across two is found).
func WithRedactor(r *redact.Redactor) Option { return func(o *options) { o.redact = r } }

func start(ctx context.Context, cfgs []Config, set *tools.Set, log *slog.Logger, dial dialFunc) *Manager {
	return startWith(ctx, cfgs, set, log, dial, options{})
}

func startWith(ctx context.Context, cfgs []Config, set *tools.Set, log *slog.Logger, dial dialFunc, o options) *Manager {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mctx, cancel := context.WithCancel(ctx)
	m := &Manager{set: set, log: log, redact: o.redact, asker: o.asker, ctx: mctx, cancel: cancel, ready: make(chan struct{})}
	seen := map[string]bool{}
	for i, cfg := range cfgs {
		key := fmt.Sprintf("mcp_servers[%d]", i)
		err := cfg.Validate(key)
		if err == nil {
			_, err = cfg.ParseSummaries(key)
		}
		if err != nil {
			log.Error("mcp server not started", "server", cfg.Name, "err", err)
			continue
		}
		if seen[cfg.Name] {
			log.Error("mcp server not started", "server", cfg.Name, "err", "duplicate name")
			continue
		}
		if other := overlapping(m.servers, cfg.Name); other != "" {
			log.Error("mcp server not started: its tool names can be another server's", "server", cfg.Name, "other_server", other)
			continue
		}
		seen[cfg.Name] = true
		m.servers = append(m.servers, newServer(m, cfg, dial))
	}
	m.pending = len(m.servers)
	if m.pending == 0 {
		m.markReady()
	} else {
		t := time.AfterFunc(readyAfter, m.markReady)
		go func() {
			select {
			case <-m.ready:
			case <-mctx.Done():
			}
			t.Stop()
		}()
	}
	for _, s := range m.servers {
		m.wg.Add(1)
		go s.run(mctx)
	}
	return m
}

func (m *Manager) markReady() { m.readyOnce.Do(func() { close(m.ready) }) }

// attempted counts a server's first attempt, listed or failed.
func (m *Manager) attempted() {
	m.pendingMu.Lock()
	m.pending--
	done := m.pending == 0
	m.pendingMu.Unlock()
	if done {
		m.markReady()
	}
}

// Ready reports whether every server has listed its tools or failed its
// first attempt, or 15 seconds have passed since Start.
func (m *Manager) Ready() bool {
	select {
	case <-m.ready:
		return true
	default:
		return false
	}
}

// WaitReady waits until Ready or ctx ends.
func (m *Manager) WaitReady(ctx context.Context) error {
	select {
	case <-m.ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops the servers (stdio processes get their stdin closed, then
// SIGTERM, then SIGKILL), removes their tools from the set and waits for
// them. It is safe to call more than once.
func (m *Manager) Close() error {
	m.cancel()
	m.wg.Wait()
	for _, s := range m.servers {
		s.mu.Lock()
		names := s.names
		s.names, s.tools = nil, nil
		s.mu.Unlock()
		m.set.Remove(names...)
	}
	return nil
}

// Tools describes the servers' tools in the set, servers in config order.
func (m *Manager) Tools() []Info {
	var out []Info
	for _, s := range m.servers {
		s.mu.Lock()
		for _, t := range s.tools {
			out = append(out, t.info())
		}
		s.mu.Unlock()
	}
	return out
}

// Status is the state of each started server, in config order.
func (m *Manager) Status() []ServerStatus {
	out := make([]ServerStatus, 0, len(m.servers))
	for _, s := range m.servers {
		s.mu.Lock()
		out = append(out, ServerStatus{Name: s.cfg.Name, Connected: s.sess != nil, Tools: len(s.tools), Err: s.lastErr})
		s.mu.Unlock()
	}
	return out
}

// server is one configured MCP server and its connection.
type server struct {
	m         *Manager
	cfg       Config
	log       *slog.Logger
	dial      dialFunc
	client    *mcp.Client
	http      *http.Client
	allowed   map[string]bool // cfg.Tools; nil: all
	summaries map[string]*template.Template
	refreshCh chan struct{}

	refreshMu sync.Mutex // one list at a time

	mu      sync.Mutex
	sess    *mcp.ClientSession // nil while not connected
	up      chan struct{}      // closed while sess is set
	lastErr error
	names   []string // names this server holds in the set
	tools   []*mcpTool

	inflightMu sync.Mutex
	inflight   map[*inflight]struct{} // its calls running (elicit.go)
}

func newServer(m *Manager, cfg Config, dial dialFunc) *server {
	s := &server{
		m:         m,
		cfg:       cfg,
		log:       m.log.With("server", cfg.Name),
		dial:      dial,
		summaries: map[string]*template.Template{},
		refreshCh: make(chan struct{}, 1),
		up:        make(chan struct{}),
	}
	if len(cfg.Tools) > 0 {
		s.allowed = make(map[string]bool, len(cfg.Tools))
		for _, t := range cfg.Tools {
			s.allowed[t] = true
		}
	}
	if sums, err := cfg.ParseSummaries(""); err == nil { // checked by startWith
		s.summaries = sums
	}
	if cfg.URL != "" {
		s.http = httpClient(cfg.Headers)
	}
	opts := &mcp.ClientOptions{
		Logger:       s.log,
		Capabilities: &mcp.ClientCapabilities{}, // no roots or sampling; elicitation (form) with an Asker
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case s.refreshCh <- struct{}{}:
			default:
			}
		},
	}
	if m.asker != nil && cfg.asks() {
		opts.Capabilities.Elicitation = &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}}
		opts.ElicitationHandler = s.elicit
	}
	if cfg.URL != "" {
		// Over stdio a dead server ends the stream; over HTTP only pings
		// tell. A busy stdio server is never cut off by a missed ping.
		opts.KeepAlive = 30 * time.Second
		opts.KeepAliveFailureThreshold = 3
	}
	s.client = mcp.NewClient(&mcp.Implementation{Name: "airlock", Version: "1"}, opts)
	return s
}

// transport makes the transport of one connection attempt.
func (s *server) transport() (mcp.Transport, error) {
	if s.dial != nil {
		t, err := s.dial(s.cfg, s.log)
		if err != nil {
			return nil, err
		}
		if t != nil { // nil: the configured transport
			if _, isHTTP := t.(*mcp.StreamableClientTransport); !isHTTP {
				t = &trackTransport{Transport: t}
			}
			return t, nil
		}
	}
	if len(s.cfg.Command) > 0 {
		return commandTransport(s.cfg, s.log, s.m.redact), nil
	}
	return &mcp.StreamableClientTransport{Endpoint: s.cfg.URL, HTTPClient: s.http}, nil
}

// run connects, serves and reconnects until ctx ends.
func (s *server) run(ctx context.Context) {
	defer s.m.wg.Done()
	backoff := minBackoff
	first := true
	for {
		sess, err := s.connect(ctx)
		if err == nil {
			s.markUp(sess)
		}
		if first {
			first = false
			if err != nil && ctx.Err() == nil {
				s.log.Error("mcp server failed; its tools are absent until it answers", "err", err, "retry_in", backoff)
			}
			s.m.attempted()
		} else if err != nil && ctx.Err() == nil {
			s.log.Warn("mcp server reconnect failed", "err", err, "retry_in", backoff)
		}
		if ctx.Err() != nil {
			if sess != nil {
				s.markDown(sess, ctx.Err())
			}
			return
		}
		if err != nil {
			s.setErr(err)
		} else {
			since := time.Now()
			err := s.serve(ctx, sess)
			if ctx.Err() != nil {
				return
			}
			if time.Since(since) >= maxBackoff {
				backoff = minBackoff
			}
			s.log.Warn("mcp server connection lost", "err", err, "retry_in", backoff)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// connect opens a session and puts the server's tools in the set.
func (s *server) connect(ctx context.Context) (*mcp.ClientSession, error) {
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	t, err := s.transport()
	if err != nil {
		return nil, err
	}
	sess, err := s.client.Connect(cctx, t, nil)
	if err != nil {
		return nil, err
	}
	if err := s.refresh(cctx, sess); err != nil {
		_ = sess.Close()
		return nil, err
	}
	return sess, nil
}

// markUp makes sess the server's session.
func (s *server) markUp(sess *mcp.ClientSession) {
	s.mu.Lock()
	s.sess, s.lastErr = sess, nil
	close(s.up)
	n := len(s.names)
	s.mu.Unlock()
	s.log.Info("mcp server connected", "tools", n)
}

// markDown forgets sess, closing it, err being why.
func (s *server) markDown(sess *mcp.ClientSession, err error) {
	s.mu.Lock()
	if s.sess == sess {
		s.sess = nil
		s.up = make(chan struct{})
	}
	s.lastErr = err
	s.mu.Unlock()
	_ = sess.Close()
}

// serve fetches the list again on each list_changed, and returns when the
// connection ends (or ctx does), the session marked down.
func (s *server) serve(ctx context.Context, sess *mcp.ClientSession) error {

	done := make(chan error, 1)
	go func() { done <- sess.Wait() }()
	var err error
loop:
	for {
		select {
		case <-ctx.Done():
			_ = sess.Close()
			err = <-done
			break loop
		case err = <-done:
			break loop
		case <-s.refreshCh:
			rctx, cancel := context.WithTimeout(ctx, connectTimeout)
			if rerr := s.refresh(rctx, sess); rerr != nil && ctx.Err() == nil {
				s.log.Warn("mcp server tools list after list_changed failed", "err", rerr)
			}
			cancel()
		}
	}
	if err == nil {
		err = errors.New("connection closed")
	}
	s.markDown(sess, err)
	return err
}

func (s *server) setErr(err error) {
	s.mu.Lock()
	s.lastErr = err
	s.mu.Unlock()
}

// session returns the connected session, waiting for a reconnect at most
// sessionWait (and within ctx).
func (s *server) session(ctx context.Context) (*mcp.ClientSession, error) {
	s.mu.Lock()
	sess, up, lastErr := s.sess, s.up, s.lastErr
	s.mu.Unlock()
	if sess != nil {
		return sess, nil
	}
	t := time.NewTimer(sessionWait)
	defer t.Stop()
	select {
	case <-up:
		s.mu.Lock()
		sess, lastErr = s.sess, s.lastErr
		s.mu.Unlock()
		if sess != nil {
			return sess, nil
		}
	case <-ctx.Done():
	case <-t.C:
	case <-s.m.ctx.Done():
		return nil, errors.New("stopped")
	}
	if lastErr != nil {
		return nil, fmt.Errorf("not connected: %w", lastErr)
	}
	return nil, errors.New("not connected")
}

// refresh lists the server's tools and replaces its tools in the set.
func (s *server) refresh(ctx context.Context, sess *mcp.ClientSession) error {
	s.refreshMu.Lock()
	defer s.refreshMu.Unlock()

	var listed []*mcp.Tool
	params := &mcp.ListToolsParams{}
	for page := 0; ; page++ {
		if page == maxListPages {
			return fmt.Errorf("tools/list: more than %d pages", maxListPages)
		}
		res, err := sess.ListTools(ctx, params)
		if err != nil {
			return fmt.Errorf("tools/list: %w", err)
		}
		listed = append(listed, res.Tools...)
		if len(listed) > maxTools {
			return fmt.Errorf("tools/list: more than %d tools", maxTools)
		}
		if res.NextCursor == "" {
			break
		}
		params = &mcp.ListToolsParams{Cursor: res.NextCursor}
	}

	s.mu.Lock()
	old := slices.Clone(s.names)
	s.mu.Unlock()
	ours := make(map[string]bool, len(old))
	for _, n := range old {
		ours[n] = true
	}

	var built []*mcpTool
	seen := map[string]bool{}
	for _, mt := range listed {
		if mt == nil || (s.allowed != nil && !s.allowed[mt.Name]) {
			continue
		}
		if seen[mt.Name] {
			s.log.Warn("mcp tool listed twice; the first is kept", "tool", mt.Name)
			continue
		}
		seen[mt.Name] = true
		t, err := s.newTool(mt)
		if err != nil {
			s.log.Warn("mcp tool skipped", "tool", mt.Name, "err", err)
			continue
		}
		if holder, taken := s.m.set.Get(t.name); taken && !ours[t.name] {
			s.log.Warn("mcp tool not offered: its name is taken", "tool", mt.Name, "name", t.name, "taken_by", holderOf(holder))
			continue
		}
		built = append(built, t)
	}
	for _, name := range s.cfg.Tools {
		if !seen[name] {
			s.log.Warn("mcp tool in config not offered by the server", "tool", name)
		}
	}

	add := make([]tools.Tool, len(built))
	names := make([]string, len(built))
	for i, t := range built {
		add[i], names[i] = t, t.name
	}
	if err := s.m.set.Replace(old, add); err != nil {
		return err
	}
	s.mu.Lock()
	s.names, s.tools = names, built
	s.mu.Unlock()
	if !slices.Equal(old, names) && len(old) > 0 {
		s.log.Info("mcp server tools changed", "tools", names)
	}
	return nil
}

// overlapping returns the name of a server among started whose tool names
// can equal those of a server called name (see namesOverlap), or "".
func overlapping(started []*server, name string) string {
	for _, o := range started {
		if short, _ := namesOverlap(o.cfg.Name, name); short != "" {
			return o.cfg.Name
		}
	}
	return ""
}

// holderOf names the tool holding a name in the set, for a log line.
func holderOf(t tools.Tool) string {
	if mt, ok := t.(*mcpTool); ok {
		return fmt.Sprintf("MCP server %q's tool %q", mt.srv.cfg.Name, mt.remote)
	}
	return fmt.Sprintf("the configured tool %q", t.Spec().Name)
}
