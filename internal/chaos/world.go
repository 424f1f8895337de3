package chaos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/airlockhq/airlock/internal/tcpproxy"
)

// The soak's workspace, tools and words.
const (
	botToken      = "xoxb-soak"
	botUser       = "U0SOAKBOT"
	signingSecret = "soak-signing-secret-0123456789abcdef"
	requester     = "U0SOAKREQ"
	stranger      = "U0SOAKSTRANGER"
	toolOp        = "soak_op"   // needs one approval
	toolPair      = "soak_pair" // needs two
	toolTimeout   = 2 * time.Second
	modelDone     = "soak done"
	actionAllow   = "airlock_allow"
	actionDeny    = "airlock_deny"
	actionAll     = "airlock_allow_all"
	plainChannels = 8 // channels without DM copies
	dmChannels    = 2 // channels whose cards get a DM copy per approver
	dmApprovers   = 4 // approvers of a DM channel
)

// approvers of every channel; the DM channels have the first dmApprovers.
var approvers = func() []string {
	out := make([]string, 10)
	for i := range out {
		out[i] = fmt.Sprintf("U0SOAKAPP%02d", i)
	}
	return out
}()

func channelOf(i int) string { return fmt.Sprintf("C0SOAK%02d", i%(plainChannels+dmChannels)) }
func hasDMs(channel string) bool {
	var n int
	fmt.Sscanf(channel, "C0SOAK%02d", &n)
	return n >= plainChannels
}

// world is one soak's fakes, its Airlock and what it saw.
type world struct {
	o        Options
	dir      string
	slack    *fakeSlack
	model    *fakeModel
	tool     *toolServer
	faults   *schedule
	servers  []*http.Server
	proxy    *tcpproxy.Proxy // between Airlock and PostgreSQL, when it cuts
	airlock  *airlock
	report   *Report
	mu       sync.Mutex
	clicks   []click
	convs    []*conversation
	killedAt []time.Time
}

func newWorld(ctx context.Context, o Options, dir string) (*world, error) {
	w := &world{o: o, dir: dir, report: &Report{Seed: o.Seed, Driver: o.Driver, Conversations: o.Conversations, Duration: o.Duration}}
	w.faults = &schedule{} // drawn when the soak starts
	w.slack = newFakeSlack(w.faults)
	w.model = &fakeModel{}
	w.tool = newToolServer(w.faults)
	slackURL, err := w.serve(w.slack)
	if err != nil {
		return nil, err
	}
	modelURL, err := w.serve(w.model)
	if err != nil {
		return nil, err
	}
	toolURL, err := w.serve(w.tool)
	if err != nil {
		return nil, err
	}
	dsn := o.DSN
	if o.Driver == "postgres" && o.PGRestart == "" {
		u, err := url.Parse(dsn)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("-dsn: a postgres:// URL is needed to cut its connections (or give -pg-restart)")
		}
		if w.proxy, err = tcpproxy.Start(u.Host); err != nil {
			return nil, err
		}
		u.Host = w.proxy.Addr
		dsn = u.String()
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, "airlock.yaml")
	if err := os.WriteFile(cfg, []byte(configYAML(addr, o, dsn, modelURL, slackURL, toolURL)), 0o600); err != nil {
		return nil, err
	}
	w.airlock = &airlock{exe: o.Exe, config: cfg, addr: addr, log: o.Log}
	return w, nil
}

// serve serves h on a free port of 127.0.0.1 and returns its base URL.
func (w *world) serve(h http.Handler) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	w.servers = append(w.servers, srv)
	return "http://" + ln.Addr().String(), nil
}

func (w *world) close() {
	w.airlock.stop()
	for _, s := range w.servers {
		_ = s.Close()
	}
	if w.proxy != nil {
		w.proxy.Close()
	}
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// configYAML is the soak's Airlock: Slack over HTTP at the fake, the
// fake model, two gated tools on the tool service, and the channels.
func configYAML(addr string, o Options, dsn, modelURL, slackURL, toolURL string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "listen: %s\nstorage: {driver: %s, dsn: %q}\n", addr, o.Driver, dsn)
	fmt.Fprintf(&b, "model: {provider: openai, name: soak, api_key: sk-soak, base_url: %q}\n", modelURL+"/v1")
	fmt.Fprintf(&b, "slack: {mode: http, bot_token: %s, signing_secret: %q, api_url: %q}\n", botToken, signingSecret, slackURL+"/api/")
	fmt.Fprintf(&b, "limits: {turns_per_minute: 0}\nconfirmation: {timeout: %s, remind_before: 0s}\n", o.Timeout)
	b.WriteString("channels:\n")
	for i := range plainChannels + dmChannels {
		ch := channelOf(i)
		if hasDMs(ch) {
			fmt.Fprintf(&b, "  - {platform: slack, id: %s, approvers: [%s], notify: [dm]}\n", ch, strings.Join(approvers[:dmApprovers], ", "))
		} else {
			fmt.Fprintf(&b, "  - {platform: slack, id: %s, approvers: [%s]}\n", ch, strings.Join(approvers, ", "))
		}
	}
	b.WriteString("tools:\n")
	for _, t := range []struct {
		name      string
		approvals int
	}{{toolOp, 1}, {toolPair, 2}} {
		fmt.Fprintf(&b, `  - name: %s
    confirm: true
    approvals: %d
    parameters: {type: object, properties: {conv: {type: string}, n: {type: integer}}, required: [conv, n]}
    http: {method: POST, url: "%s/%s", timeout: %s}
`, t.name, t.approvals, toolURL, t.name, toolTimeout)
	}
	return b.String()
}

// airlock is the soak's `airlock run` process, started again after each
// kill on the same address.
type airlock struct {
	exe, config, addr string
	log               io.Writer
	mu                sync.Mutex
	cmd               *exec.Cmd
	exited            chan struct{} // closed when cmd has exited
	starts            int
}

// start starts Airlock and waits until it answers HTTP (its readiness
// may still wait on the database).
func (a *airlock) start(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cmd != nil {
		return nil // running: another restart brought it up
	}
	cmd := exec.Command(a.exe, "run", "-config", a.config)
	out := a.log
	if out == nil {
		out = io.Discard
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start airlock: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	a.cmd, a.exited = cmd, exited
	a.starts++
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			a.cmd = nil
			return errors.New("start airlock: it exited (run with -v to see its logs)")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		resp, err := http.Get("http://" + a.addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			return nil
		}
	}
	return errors.New("start airlock: it did not answer within 60s")
}

// cardsBehind is how many card messages show an older state than the
// database holds, as Airlock's /metrics says (airlock_card_sync_behind);
// false when it cannot say (not running, no answer).
func (a *airlock) cardsBehind() (int, bool) {
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + a.addr + "/metrics")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, false
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || name != "airlock_card_sync_behind" {
			continue
		}
		n, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return 0, false
		}
		return int(n), true
	}
	return 0, false
}

// kill SIGKILLs Airlock: nothing of it runs to the end.
func (a *airlock) kill() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cmd != nil {
		_ = a.cmd.Process.Signal(syscall.SIGKILL)
		<-a.exited
		a.cmd = nil
	}
}

// stop ends Airlock with SIGTERM, then SIGKILL after 20 s.
func (a *airlock) stop() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cmd == nil {
		return
	}
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.exited:
	case <-time.After(20 * time.Second):
		_ = a.cmd.Process.Signal(syscall.SIGKILL)
		<-a.exited
	}
	a.cmd = nil
}
