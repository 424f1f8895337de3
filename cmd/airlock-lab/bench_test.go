package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/bench"
)

// benchSmoke runs airlock bench with tiny numbers and checks that the
// report has every figure and that every decision ran exactly once.
func benchSmoke(t *testing.T, args ...string) bench.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	dir := t.TempDir()
	code := run(ctx, append([]string{"bench", "-cards", "20", "-clickers", "4", "-json",
		"-cpuprofile", filepath.Join(dir, "cpu.pprof"), "-memprofile", filepath.Join(dir, "mem.pprof")}, args...),
		nil, &out, &errOut)
	if code != 0 {
		t.Fatalf("airlock bench: exit %d\nstdout: %s\nstderr: %s", code, out.String(), errOut.String())
	}
	var rep bench.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("report is not JSON: %v\n%s", err, out.String())
	}
	if rep.Cards != 20 || rep.Clickers != 4 || rep.Decisions != 20 {
		t.Errorf("cards %d, clickers %d, decisions %d; want 20, 4, 20", rep.Cards, rep.Clickers, rep.Decisions)
	}
	if rep.AirlockPID <= 0 || rep.AirlockPID == os.Getpid() {
		t.Errorf("airlock_pid %d: Airlock did not run in a process of its own (the bench is %d)", rep.AirlockPID, os.Getpid())
	}
	if !rep.ExactlyOnce || rep.ToolRuns != 20 {
		t.Errorf("exactly once %v, tool runs %d; want true, 20", rep.ExactlyOnce, rep.ToolRuns)
	}
	if rep.CardUpdates < 20 || rep.Refusals != 0 || rep.UnexpectedPosts != 0 {
		t.Errorf("card updates %d, refusals %d, unexpected posts %d", rep.CardUpdates, rep.Refusals, rep.UnexpectedPosts)
	}
	for name, v := range map[string]float64{
		"ack_p50_ms": rep.AckP50Ms, "ack_p99_ms": rep.AckP99Ms, "bare_p50_ms": rep.BareP50Ms, "bare_p99_ms": rep.BareP99Ms,
		"ack_p99_over_bare": rep.AckP99OverBare, "ack_server_p99_at_most_ms": rep.AckServerP99AtMostMs,
		"ack_wait_p99_ms": rep.AckWaitP99Ms, "bare_wait_p99_ms": rep.BareWaitP99Ms, "decision_seconds": rep.DecisionSeconds, "decisions_per_second": rep.DecisionsPerSecond,
		"raw_sqlite_commits_per_second": rep.RawSQLiteCommitsPerSecond, "decisions_over_raw_commits": rep.DecisionsOverRawCommits,
		"cards_seconds": rep.CardsSeconds, "rss_before_bytes": float64(rep.RSSBeforeBytes), "rss_pending_bytes": float64(rep.RSSPendingBytes),
		"rss_peak_bytes": float64(rep.RSSPeakBytes), "peak_over_pending": rep.PeakOverPending,
	} {
		if !(v > 0) {
			t.Errorf("%s = %v, want a positive figure", name, v)
		}
	}
	if !bytes.Contains(out.Bytes(), []byte(`"rss_per_card_second_half_bytes":`)) || !bytes.Contains(out.Bytes(), []byte(`"rss_per_card_settled_bytes":`)) {
		t.Errorf("report lacks rss_per_card_second_half_bytes or rss_per_card_settled_bytes:\n%s", out.String())
	}
	if len(rep.Targets) != 4 {
		t.Errorf("%d targets, want 4: %+v", len(rep.Targets), rep.Targets)
	}
	for _, p := range []string{"cpu.pprof", "mem.pprof"} {
		if fi, err := os.Stat(filepath.Join(dir, p)); err != nil || fi.Size() == 0 {
			t.Errorf("profile %s not written: %v", p, err)
		}
	}
	return rep
}

func TestBenchSmoke(t *testing.T) {
	rep := benchSmoke(t)
	if rep.LoadedBareRequests != 0 || rep.AckP99OverLoadedBare != 0 {
		t.Errorf("without -probe: %d loaded bare requests, ratio %v; want none", rep.LoadedBareRequests, rep.AckP99OverLoadedBare)
	}
}

// With -probe, the bare handler is also timed while the clicks are sent,
// and the ack's p99 is set against it.
func TestBenchProbe(t *testing.T) {
	rep := benchSmoke(t, "-probe", "1000")
	if rep.LoadedBareRequests < 1 || !(rep.LoadedBareP50Ms > 0) || !(rep.LoadedBareP99Ms >= rep.LoadedBareP50Ms) {
		t.Errorf("loaded bare: %d requests, p50 %v, p99 %v", rep.LoadedBareRequests, rep.LoadedBareP50Ms, rep.LoadedBareP99Ms)
	}
	if want := rep.AckP99Ms / rep.LoadedBareP99Ms; rep.AckP99OverLoadedBare != want {
		t.Errorf("ack_p99_over_loaded_bare = %v, want %v", rep.AckP99OverLoadedBare, want)
	}
}

func TestBenchSmokePostgres(t *testing.T) {
	dsn := os.Getenv("AIRLOCK_TEST_POSTGRES_DSN")
	if dsn == "" {
		t.Skip("AIRLOCK_TEST_POSTGRES_DSN not set")
	}
	rep := benchSmoke(t, "-driver", "postgres", "-dsn", dsn)
	if rep.RawPostgresCommitsPerSecond <= 0 {
		t.Errorf("raw_postgres_commits_per_second = %v, want a positive figure", rep.RawPostgresCommitsPerSecond)
	}
}

// The text report names every figure and every target.
func TestBenchText(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	if code := run(ctx, []string{"bench", "-cards", "10", "-clickers", "2"}, nil, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{"ack latency", "bare handler", "ack p99 / bare p99", "decisions", "raw SQLite commits/s",
		"decisions/s ÷ raw commits/s", "CPU per decision", "bytes per card", "while the second half was made", "once the runtime returned its free memory", "RSS peak", "target", "ok: every decision ran its tool exactly once"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

func TestBenchFlags(t *testing.T) {
	// A database that holds something is refused, and left as it was.
	used := filepath.Join(t.TempDir(), "airlock.db")
	if err := os.WriteFile(used, []byte("SQLite format 3\x00 and the rest"), 0o600); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if b, err := os.ReadFile(used); err != nil || string(b) != "SQLite format 3\x00 and the rest" {
			t.Errorf("the used database changed: %q, %v", b, err)
		}
	}()
	for _, args := range [][]string{
		{"bench", "-cards", "0"},
		{"bench", "-clickers", "0"},
		{"bench", "-probe", "-1"},
		{"bench", "-probe", "5001"},
		{"bench", "-driver", "mysql"},
		{"bench", "-driver", "postgres"},
		{"bench", "-dsn", used},
		{"bench", "-dsn", "file:" + used + "?_busy_timeout=1"},
		{"bench-server", "-dsn", filepath.Join(t.TempDir(), "a.db"), "-slack", "http://127.0.0.1:1"}, // not started by the bench
	} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), args, nil, &out, &errOut); code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, errOut.String())
		}
		if args[1] == "-probe" && !strings.Contains(errOut.String(), "-probe must be") {
			t.Errorf("%v: stderr %q does not name -probe", args, errOut.String())
		}
		if strings.Contains(strings.Join(args, " "), used) && !strings.Contains(errOut.String(), "not empty") {
			t.Errorf("%v: stderr %q does not say the file is not empty", args, errOut.String())
		}
	}
}

// bench-gateway sends its requests to the approval API of a real core on
// SQLite and to a bare handler, and reports both; every call came back
// allowed and was audited, or it fails.
func TestBenchGatewaySmoke(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	if code := run(ctx, []string{"bench-gateway", "-rate", "40", "-duration", "1s", "-sessions", "3", "-json"}, nil, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var rep struct {
		Requests, Audited, Sessions int
		APIP99                      float64 `json:"api_p99_ms"`
		BareP99                     float64 `json:"bare_p99_ms"`
		Added                       float64 `json:"added_p99_ms"`
		Floor                       float64 `json:"floor_added_p99_ms"`
		Met                         bool    `json:"floor_met"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if rep.Requests != 40 || rep.Audited != 40 || !(rep.APIP99 > 0) || !(rep.BareP99 > 0) || rep.Added != rep.APIP99-rep.BareP99 ||
		rep.Floor != 5 || rep.Met != (rep.Added <= rep.Floor) {
		t.Fatalf("report: %+v", rep)
	}
	if code := run(ctx, []string{"bench-gateway", "-rate", "0"}, nil, &out, &errOut); code != 2 {
		t.Fatalf("a rate of 0: exit %d", code)
	}
}

// bench-mcp calls an upstream MCP server's tool through Airlock's MCP
// server and directly, and reports both; the upstream ran every call
// once, or it fails.
func TestBenchMCPSmoke(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	if code := run(ctx, []string{"bench-mcp", "-rate", "20", "-duration", "1s", "-json"}, nil, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var rep struct {
		Calls  int     `json:"calls"`
		Runs   int     `json:"upstream_runs"`
		Direct float64 `json:"direct_p99_ms"`
		Air    float64 `json:"airlock_p99_ms"`
		Added  float64 `json:"added_p99_ms"`
		Met    bool    `json:"floor_met"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if rep.Calls != 20 || rep.Runs != 40 || !(rep.Direct > 0) || !(rep.Air > 0) || rep.Added != rep.Air-rep.Direct || rep.Met != (rep.Added <= 5) {
		t.Fatalf("report: %+v", rep)
	}
}
