package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlockhq/airlock/adapters/slack"
	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/confirm"
	airmetrics "github.com/airlockhq/airlock/metrics"
	"github.com/airlockhq/airlock/model"
	"github.com/airlockhq/airlock/storage"
	"github.com/airlockhq/airlock/tools"
)

// benchServerCmd is the hidden subcommand airlock bench starts itself as:
// the Airlock side of the bench, in a process of its own so that what the
// bench measures of it (resident memory, CPU) is Airlock's alone, not the
// fake Slack's or the clickers'.
const benchServerCmd = "bench-server"

// benchServerEnv is set in the environment of the bench's server process:
// bench-server runs only with it, and a test binary started as one (see
// TestMain) runs it instead of the tests.
const benchServerEnv = "AIRLOCK_BENCH_SERVER"

// benchHello is the first line the bench server prints on stdout, once
// it serves: its listeners' base URLs.
type benchHello struct {
	Events string `json:"events"` // Airlock's HTTP server (/slack/events, /metrics)
	Bare   string `json:"bare"`   // the bare net/http handler, the ack baseline
}

// benchServer runs Airlock against the bench's fake Slack Web API (-slack)
// with an instant model and an instant gated tool, as airlock run wires
// it, plus a bare handler. The bench asks it for its figures over its
// stdin and stdout, one JSON line each way (see benchControl); it stops
// when stdin is closed (the bench is done, or gone).
func benchServer(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("airlock "+benchServerCmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	driver := fs.String("driver", storage.DriverSQLite, "sqlite or postgres")
	dsn := fs.String("dsn", "", "the database")
	slackAPI := fs.String("slack", "", "the fake Slack Web API's base URL")
	workers := fs.Int("workers", 0, "the Slack adapter's workers")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if os.Getenv(benchServerEnv) == "" {
		// Not for use on its own: it would recover whatever database it is
		// given with the bench's tool, and answer to the bench's secret.
		fmt.Fprintln(stderr, "airlock bench-server: only airlock bench starts it")
		return 2
	}
	if *dsn == "" || *slackAPI == "" || stdin == nil {
		fmt.Fprintln(stderr, "airlock bench-server: -dsn and -slack are required (it is started by airlock bench)")
		return 2
	}
	if err := serveBench(ctx, *driver, *dsn, *slackAPI, *workers, stdin, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "airlock bench-server: %v\n", err)
		return 1
	}
	return 0
}

func serveBench(ctx context.Context, driver, dsn, slackAPI string, workers int, stdin io.Reader, stdout, stderr io.Writer) error {
	// Logs as airlock run writes them (info, text), to nowhere; warnings
	// and errors also to stderr.
	logger := slog.New(benchLogHandler{
		all:  slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}),
		warn: slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}),
	})
	db, err := storage.Open(ctx, driver, dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := db.SyncClock(ctx); err != nil {
		return err
	}
	tool := &benchTool{runs: map[string]int{}}
	m := airmetrics.New(nil)
	b, err := bot.New(bot.Config{
		SingleProcess: db.Driver() == storage.DriverSQLite,
		Store:         db,
		Model:         m.Provider(benchModel{}, "bench"),
		Tools:         benchTools{tool},
		Policy:        confirm.NewPolicy(true, nil),
		Channels:      bot.NewChannels([]bot.Channel{{Platform: slack.Platform, ID: "*", Approvers: []string{benchApprover}}}),
		Metrics:       m,
		Now:           db.Clock(),
		Logger:        logger,
		WorkerID:      fmt.Sprintf("bench/%d", os.Getpid()),
		// The per-person and per-channel limits guard the turn path,
		// not decisions: off, so one requester can make every card.
	})
	if err != nil {
		return err
	}
	sa, err := slack.New(slack.Config{
		Mode: slack.ModeHTTP, BotToken: "xoxb-bench", SigningSecret: benchSecret, APIURL: slackAPI + "/api/", Logger: logger,
		Workers: workers, Metrics: m,
	}, b, db)
	if err != nil {
		return err
	}
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	if err := sa.Start(runCtx); err != nil {
		return err
	}
	b.Register(slack.Platform, sa)
	var bg sync.WaitGroup
	defer bg.Wait()
	defer stopRun()
	bg.Go(func() { _ = sa.Run(runCtx) })
	bg.Go(func() { b.Run(runCtx, time.Second) })

	routes := map[string]http.Handler{"/slack/events": sa.Handler(), "GET /metrics": m.Handler()}
	airSrv, airURL, err := benchServe(benchStamped(httpHandler(db, routes)))
	if err != nil {
		return err
	}
	defer airSrv.Close()
	bareSrv, bareURL, err := benchServe(benchStamped(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
	})))
	if err != nil {
		return err
	}
	defer bareSrv.Close()

	enc := json.NewEncoder(stdout)
	if err := enc.Encode(benchHello{Events: airURL, Bare: bareURL}); err != nil {
		return err
	}
	ctl := &benchControl{db: db, sa: sa, tool: tool}
	defer ctl.stopCPU()
	// Requests are read beside, so that a signal stops the process even
	// while stdin stays open; they are answered here, one at a time.
	type read struct {
		req benchRequest
		err error
	}
	reads := make(chan read)
	go func() {
		dec := json.NewDecoder(stdin)
		for {
			var r read
			r.err = dec.Decode(&r.req)
			select {
			case reads <- r:
			case <-ctx.Done():
				return
			}
			if r.err != nil {
				return
			}
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case r := <-reads:
			switch {
			case errors.Is(r.err, io.EOF): // the bench is done, or gone
				return nil
			case r.err != nil:
				return fmt.Errorf("bad request: %w", r.err)
			}
			if err := enc.Encode(ctl.do(ctx, r.req)); err != nil {
				return err
			}
		}
	}
}

// benchRequest is one of the bench's requests to its Airlock process:
//
//	cpu         its CPU time and peak memory so far (benchSample)
//	memory      the same with its resident memory after a GC; Wait: once
//	            the adapter's work so far is done; Settle: after returning
//	            the Go runtime's free memory to the system
//	heap        write a heap profile to File
//	cpu-start   start a CPU profile into File; cpu-stop ends it
//	result      the tool's runs (benchResult), once the adapter's work is done
type benchRequest struct {
	Op           string `json:"op"`
	Wait, Settle bool   `json:",omitempty"`
	File         string `json:"file,omitempty"`
}

// benchReply answers a benchRequest.
type benchReply struct {
	Error  string       `json:"error,omitempty"`
	Sample *benchSample `json:"sample,omitempty"`
	Result *benchResult `json:"result,omitempty"`
}

// benchSample is the process's figures.
type benchSample struct {
	PID      int   `json:"pid"`
	RSS      int64 `json:"rss"`       // memory: VmRSS (or the Go runtime's total), after a GC
	HeapLive int64 `json:"heap_live"` // memory: the Go heap's live bytes, after the same GC
	Peak     int64 `json:"peak"`      // VmHWM
	CPU      int64 `json:"cpu_ns"`    // user and system CPU time so far
	Procs    int   `json:"gomaxprocs"`
}

// benchResult is the bench tool's runs per batch, and how many batches
// are still open.
type benchResult struct {
	Runs     map[string]int `json:"runs"`
	ToolRuns int64          `json:"tool_runs"`
	Open     int            `json:"open"`
}

// benchControl answers the bench's requests in its Airlock process.
type benchControl struct {
	db      *storage.DB
	sa      *slack.Adapter
	tool    *benchTool
	cpuFile *os.File
}

func (c *benchControl) do(ctx context.Context, req benchRequest) benchReply {
	var err error
	reply := benchReply{}
	switch req.Op {
	case "cpu", "memory":
		if req.Wait {
			c.sa.Wait()
		}
		if req.Settle {
			debug.FreeOSMemory()
		}
		s := benchSample{PID: os.Getpid(), Procs: runtime.GOMAXPROCS(0), CPU: int64(benchCPU()), Peak: benchPeak()}
		if req.Op == "memory" { // not for cpu: its GC would count in the span measured
			s.RSS, s.HeapLive = benchMemory()
		}
		reply.Sample = &s
	case "heap":
		err = benchHeapProfile(req.File)
	case "cpu-start":
		err = c.startCPU(req.File)
	case "cpu-stop":
		err = c.stopCPU()
	case "result":
		reply.Result, err = c.result(ctx)
	default:
		err = fmt.Errorf("unknown op %q", req.Op)
	}
	if err != nil {
		reply.Error = err.Error()
	}
	return reply
}

func (c *benchControl) startCPU(path string) error {
	if c.cpuFile != nil {
		return errors.New("a CPU profile is already being written")
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return err
	}
	c.cpuFile = f
	return nil
}

func (c *benchControl) stopCPU() error {
	if c.cpuFile == nil {
		return nil
	}
	pprof.StopCPUProfile()
	err := c.cpuFile.Close()
	c.cpuFile = nil
	return err
}

func (c *benchControl) result(ctx context.Context) (*benchResult, error) {
	c.sa.Wait()
	res := &benchResult{}
	for _, st := range []confirm.BatchStatus{confirm.BatchPending, confirm.BatchDecided, confirm.BatchRunning} {
		ids, err := c.db.BatchesIn(ctx, st)
		if err != nil {
			return nil, err
		}
		res.Open += len(ids)
	}
	c.tool.mu.Lock()
	defer c.tool.mu.Unlock()
	res.Runs, res.ToolRuns = maps.Clone(c.tool.runs), c.tool.n.Load()
	return res, nil
}

// benchMemory returns the resident set and the Go heap's live bytes after
// a GC, so two samples compare what is kept rather than where the GC
// cycle happened to be.
func benchMemory() (rss, heapLive int64) {
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	heapLive = int64(s[0].Value.Uint64())
	if v, ok := procStatus("VmRSS"); ok {
		return v, heapLive
	}
	return int64(s[1].Value.Uint64() - s[2].Value.Uint64()), heapLive
}

// benchCPU is the CPU time (user and system) the process has used, from
// /proc/self/stat (in clock ticks, 100 a second); zero where it is missing.
func benchCPU() time.Duration {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0
	}
	// The fields after the command (which may hold spaces), from field 3.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(utime+stime) * (time.Second / 100)
}

// benchPeak is the peak resident set (VmHWM), or the Go runtime's total
// where /proc is missing.
func benchPeak() int64 {
	if v, ok := procStatus("VmHWM"); ok {
		return v
	}
	rss, _ := benchMemory()
	return rss
}

// procStatus reads a "kB" field of /proc/self/status, in bytes.
func procStatus(field string) (int64, bool) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != field {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		return n << 10, err == nil
	}
	return 0, false
}

func benchHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return pprof.Lookup("heap").WriteTo(f, 0)
}

// benchLogHandler formats every record at info and up, as airlock run
// does, and also writes warnings and errors to stderr.
type benchLogHandler struct{ all, warn slog.Handler }

func (h benchLogHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.all.Enabled(ctx, l)
}
func (h benchLogHandler) Handle(ctx context.Context, r slog.Record) error {
	if h.warn.Enabled(ctx, r.Level) {
		_ = h.warn.Handle(ctx, r.Clone())
	}
	return h.all.Handle(ctx, r)
}
func (h benchLogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return benchLogHandler{all: h.all.WithAttrs(as), warn: h.warn.WithAttrs(as)}
}
func (h benchLogHandler) WithGroup(g string) slog.Handler {
	return benchLogHandler{all: h.all.WithGroup(g), warn: h.warn.WithGroup(g)}
}

// benchModel answers at once: a call of the bench tool to a person's
// message, and a short text to the tool's result. It keeps nothing, so it
// adds nothing to the memory per card (modeltest.Scripted records every
// request).
type benchModel struct{}

func (benchModel) Generate(_ context.Context, req model.Request) (model.Message, error) {
	if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == model.RoleTool {
		return model.Message{Role: model.RoleAssistant, Text: benchAnswer}, nil
	}
	return model.Message{Role: model.RoleAssistant, Text: "I'll run the bench tool.",
		ToolCalls: []confirm.ToolCall{{ID: "call_bench", Name: benchToolName, Args: json.RawMessage(`{"target":"bench"}`)}}}, nil
}

// benchTool is an instant gated tool counting its runs per batch.
type benchTool struct {
	mu   sync.Mutex
	runs map[string]int // batch id -> runs
	n    atomic.Int64
}

func (t *benchTool) Spec() model.ToolSpec {
	return model.ToolSpec{Name: benchToolName, Description: "Does nothing, at once.", Parameters: json.RawMessage(`{"type":"object"}`)}
}
func (t *benchTool) Confirm() bool                           { return true }
func (t *benchTool) Validate(json.RawMessage) error          { return nil }
func (t *benchTool) Summary(json.RawMessage) (string, error) { return "Run the bench tool", nil }
func (t *benchTool) Run(_ context.Context, _ json.RawMessage, key string) (string, error) {
	batch, _, _ := strings.Cut(key, "/")
	t.mu.Lock()
	t.runs[batch]++
	t.mu.Unlock()
	t.n.Add(1)
	return `{"ok":true}`, nil
}

type benchTools struct{ t *benchTool }

func (s benchTools) Get(name string) (tools.Tool, bool) { return s.t, name == benchToolName }
func (s benchTools) Specs() []model.ToolSpec            { return []model.ToolSpec{s.t.Spec()} }

// benchStartHeader carries, in the bench's servers' answers, when the
// handler started on the request (Unix nanoseconds).
const benchStartHeader = "X-Airlock-Bench-Handler-Start"

// benchStamped adds benchStartHeader to h's answers: the bench splits a
// click's latency into the wait before the handler and the rest.
func benchStamped(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(benchStartHeader, strconv.FormatInt(time.Now().UnixNano(), 10))
		h.ServeHTTP(w, r)
	})
}
