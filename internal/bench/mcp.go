package bench

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockhq/airlock/adapters/slack"
	"github.com/airlockhq/airlock/adapters/slack/slacktest"
	"github.com/airlockhq/airlock/gateway"
	"github.com/airlockhq/airlock/mcpserver"
	"github.com/airlockhq/airlock/mcptools"
	"github.com/airlockhq/airlock/storage"
	"github.com/airlockhq/airlock/tools"
)

// MCPCommand is airlock-lab's command for Airlock-as-an-MCP-server's
// latency bench.
const MCPCommand = "bench-mcp"

// Floor of issue 37: an ungated tools/call through Airlock, against the
// upstream server called directly.
const mcpP99Floor = 5.0 // ms above direct

// mcpReport is what bench-mcp prints.
type mcpReport struct {
	Rate         int     `json:"rate_per_second"`
	Calls        int     `json:"calls"`
	DirectP50Ms  float64 `json:"direct_p50_ms"`
	DirectP99Ms  float64 `json:"direct_p99_ms"`
	AirlockP50Ms float64 `json:"airlock_p50_ms"`
	AirlockP99Ms float64 `json:"airlock_p99_ms"`
	AddedP99Ms   float64 `json:"added_p99_ms"`
	UpstreamRuns int     `json:"upstream_runs"`
	FloorP99Ms   float64 `json:"floor_added_p99_ms"`
	FloorMet     bool    `json:"floor_met"`
	Database     string  `json:"database"`
}

// MCP is bench-mcp: an ungated tools/call of an upstream MCP server's
// tool through Airlock's MCP endpoint (a real core on a SQLite file, the
// upstream joined as airlock run joins it), against the same call made
// directly to the upstream server, at -rate calls a second each, one of
// each a tick, both with the Go MCP SDK's client. It fails on a wrong
// answer, or unless the upstream ran every call exactly once; the floor
// (p99 at most 5 ms above direct) is checked with -check.
func MCP(ctx context.Context, args []string, stdout, stderr io.Writer, h HTTP) int {
	fs := flag.NewFlagSet("airlock-lab "+MCPCommand, flag.ContinueOnError)
	fs.SetOutput(stderr)
	rate := fs.Int("rate", 100, "calls a second through Airlock (and as many directly)")
	duration := fs.Duration("duration", 15*time.Second, "how long to call")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	check := fs.Bool("check", false, "exit 1 when the floor is missed")
	profile := fs.String("cpuprofile", "", "write a CPU profile of the run to this file")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	stop, err := cpuProfile(*profile)
	if err != nil {
		fmt.Fprintf(stderr, "airlock-lab bench-mcp: -cpuprofile: %v\n", err)
		return 1
	}
	defer stop()
	if *rate <= 0 || *duration <= 0 {
		fmt.Fprintln(stderr, "airlock-lab bench-mcp: -rate and -duration must be positive")
		return 2
	}
	rep, err := runMCP(ctx, *rate, *duration, h)
	if err != nil {
		fmt.Fprintf(stderr, "airlock-lab bench-mcp: %v\n", err)
		return 1
	}
	if *asJSON {
		_ = json.NewEncoder(stdout).Encode(rep)
	} else {
		fmt.Fprintf(stdout, "%d calls at %d/s (%s): direct p50 %.2f ms, p99 %.2f ms; through Airlock p50 %.2f ms, p99 %.2f ms; added p99 %.2f ms (floor %.0f ms: %s); the upstream ran %d\n",
			rep.Calls, rep.Rate, rep.Database, rep.DirectP50Ms, rep.DirectP99Ms, rep.AirlockP50Ms, rep.AirlockP99Ms, rep.AddedP99Ms, rep.FloorP99Ms, met(rep.FloorMet), rep.UpstreamRuns)
	}
	if *check && !rep.FloorMet {
		return 1
	}
	return 0
}

// upstream is the bench's upstream MCP server: one tool, echo, counting
// its runs by argument.
type upstream struct {
	mu   sync.Mutex
	runs map[string]int
}

func (u *upstream) handler() http.Handler {
	srv := mcp.NewServer(&mcp.Implementation{Name: "bench-upstream", Version: "1"}, nil)
	type in struct {
		N string `json:"n"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "Echo n."}, func(_ context.Context, _ *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
		u.mu.Lock()
		u.runs[a.N]++
		u.mu.Unlock()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo " + a.N}}}, nil, nil
	})
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
}

func runMCP(ctx context.Context, rate int, duration time.Duration, h HTTP) (*mcpReport, error) {
	dir, err := os.MkdirTemp("", "airlock-bench-mcp-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	up := &upstream{runs: map[string]int{}}
	upSrv := httptest.NewServer(up.handler())
	defer upSrv.Close()
	fake := httptest.NewServer(slacktest.New(slacktest.Options{TeamID: team, Team: "Bench", Domain: "bench", BotUser: botUser, BotID: "B0BENCH", Discard: true}))
	defer fake.Close()

	set, err := tools.New(nil, tools.Options{})
	if err != nil {
		return nil, err
	}
	no := false
	mgr := mcptools.Start(ctx, []mcptools.Config{{Name: "up", URL: upSrv.URL, Confirm: &no}}, set, serverLogger(io.Discard))
	defer mgr.Close()
	if err := mgr.WaitReady(ctx); err != nil {
		return nil, err
	}
	client := gateway.Client{Name: "bench-mcp", Token: gwToken, ActsFor: "U0BENCHREQ",
		Channel: gateway.ChannelRef{Platform: slack.Platform, ID: channelID(0)}, Tools: []string{"up__*"}, RequestsPerMinute: 1 << 30}
	gw := gateway.Config{MCP: gateway.MCP{Path: "/mcp"}, Clients: []gateway.Client{client}}
	gw.SetDefaults()
	in, err := startInstance(ctx, storage.DriverSQLite, filepath.Join(dir, "airlock.db"), fake.URL, 0, serverLogger(io.Discard),
		instanceOptions{gateway: gw, tools: set})
	if err != nil {
		return nil, err
	}
	defer in.close()
	mcpSrv := &mcpserver.Server{Config: gw, Tools: in.bot.MCP(), Metrics: in.metrics}
	airSrv, airURL, err := serve(h, h.Handler(in.db, map[string]http.Handler{"/mcp": mcpSrv.Handler()}))
	if err != nil {
		return nil, err
	}
	defer airSrv.Close()

	direct, err := mcpSession(ctx, upSrv.URL, "")
	if err != nil {
		return nil, fmt.Errorf("connect to the upstream: %w", err)
	}
	defer direct.Close()
	through, err := mcpSession(ctx, airURL+"/mcp", gwToken)
	if err != nil {
		return nil, fmt.Errorf("connect to Airlock: %w", err)
	}
	defer through.Close()

	n := int(duration.Seconds() * float64(rate))
	call := func(cs *mcp.ClientSession, name, arg string) (time.Duration, error) {
		start := time.Now()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{"n": arg}})
		took := time.Since(start)
		if err != nil {
			return 0, fmt.Errorf("%s(%s): %w", name, arg, err)
		}
		if res.IsError || len(res.Content) != 1 || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "echo "+arg) {
			return 0, fmt.Errorf("%s(%s): an unexpected result %+v", name, arg, res.Content)
		}
		return took, nil
	}
	directLat, airLat, err := pairs(ctx, n, rate,
		func(i int) (time.Duration, error) { return call(direct, "echo", fmt.Sprintf("d%d", i)) },
		func(i int) (time.Duration, error) { return call(through, "up__echo", fmt.Sprintf("a%d", i)) })
	if err != nil {
		return nil, err
	}
	runs := 0
	up.mu.Lock()
	for arg, k := range up.runs {
		if k != 1 {
			up.mu.Unlock()
			return nil, fmt.Errorf("the upstream ran %s %d times", arg, k)
		}
		runs++
	}
	up.mu.Unlock()
	if runs != 2*n {
		return nil, fmt.Errorf("the upstream ran %d calls of %d", runs, 2*n)
	}
	rep := &mcpReport{Rate: rate, Calls: n, UpstreamRuns: runs, Database: storage.DriverSQLite, FloorP99Ms: mcpP99Floor,
		DirectP50Ms: quantileMs(directLat, 0.5), DirectP99Ms: quantileMs(directLat, 0.99),
		AirlockP50Ms: quantileMs(airLat, 0.5), AirlockP99Ms: quantileMs(airLat, 0.99)}
	rep.AddedP99Ms = rep.AirlockP99Ms - rep.DirectP99Ms
	rep.FloorMet = rep.AddedP99Ms <= mcpP99Floor
	return rep, nil
}

// mcpSession connects the Go MCP SDK's client to endpoint, with a bearer
// token when one is given.
func mcpSession(ctx context.Context, endpoint, token string) (*mcp.ClientSession, error) {
	hc := &http.Client{Transport: http.DefaultTransport}
	if token != "" {
		hc.Transport = bearerTransport{token: token}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "bench-mcp", Version: "1"}, nil)
	return c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc}, nil)
}

type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}
