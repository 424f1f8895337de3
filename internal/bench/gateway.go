package bench

import (
	"bytes"
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
	"time"

	"github.com/airlockhq/airlock/adapters/slack"
	"github.com/airlockhq/airlock/adapters/slack/slacktest"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/gateway"
	"github.com/airlockhq/airlock/storage"
)

// GatewayCommand is airlock-lab's command for the approval API's
// latency bench.
const GatewayCommand = "bench-gateway"

// Floor of issue 36: the API's added p99 for a call no rule asks about.
const gatewayP99Floor = 5.0 // ms above the bare handler's p99

const gwToken = "bench-gateway-token-0123456789abcdef"

// gatewayReport is what bench-gateway prints.
type gatewayReport struct {
	Rate         int     `json:"rate_per_second"`
	Requests     int     `json:"requests"`
	Sessions     int     `json:"sessions"`
	BareP50Ms    float64 `json:"bare_p50_ms"`
	BareP99Ms    float64 `json:"bare_p99_ms"`
	APIP50Ms     float64 `json:"api_p50_ms"`
	APIP99Ms     float64 `json:"api_p99_ms"`
	AddedP99Ms   float64 `json:"added_p99_ms"`
	Audited      int     `json:"audited"`
	FloorP99Ms   float64 `json:"floor_added_p99_ms"`
	FloorMet     bool    `json:"floor_met"`
	Database     string  `json:"database"`
	DurationSecs float64 `json:"duration_seconds"`
}

// Gateway is bench-gateway: the approval API's added latency for a call
// no rule asks about (request → allowed, audited), at -rate requests a
// second on SQLite, against a bare handler served the same way in the
// same run. Each tick sends one request to each, so both see the same
// machine. Latency is from sending to the whole answer read. It fails
// (exit 1) on a wrong answer, or a call left unaudited; the floor is
// reported, and checked with -check.
func Gateway(ctx context.Context, args []string, stdout, stderr io.Writer, h HTTP) int {
	fs := flag.NewFlagSet("airlock-lab "+GatewayCommand, flag.ContinueOnError)
	fs.SetOutput(stderr)
	rate := fs.Int("rate", 200, "requests a second to the API (and as many to the bare handler)")
	duration := fs.Duration("duration", 15*time.Second, "how long to send")
	sessions := fs.Int("sessions", 8, "agent sessions the requests are spread over")
	dir := fs.String("dir", "", "where the SQLite file goes (default: a new temporary directory)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	check := fs.Bool("check", false, "exit 1 when the floor is missed")
	profile := fs.String("cpuprofile", "", "write a CPU profile of the run to this file")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	stop, err := cpuProfile(*profile)
	if err != nil {
		fmt.Fprintf(stderr, "airlock-lab bench-gateway: -cpuprofile: %v\n", err)
		return 1
	}
	defer stop()
	if *rate <= 0 || *duration <= 0 || *sessions <= 0 {
		fmt.Fprintln(stderr, "airlock-lab bench-gateway: -rate, -duration and -sessions must be positive")
		return 2
	}
	rep, err := runGateway(ctx, *rate, *duration, *sessions, *dir, h)
	if err != nil {
		fmt.Fprintf(stderr, "airlock-lab bench-gateway: %v\n", err)
		return 1
	}
	if *asJSON {
		_ = json.NewEncoder(stdout).Encode(rep)
	} else {
		fmt.Fprintf(stdout, "%d requests at %d/s over %d sessions (%s): bare p50 %.2f ms, p99 %.2f ms; API p50 %.2f ms, p99 %.2f ms; added p99 %.2f ms (floor %.0f ms: %v); %d audited\n",
			rep.Requests, rep.Rate, rep.Sessions, rep.Database, rep.BareP50Ms, rep.BareP99Ms, rep.APIP50Ms, rep.APIP99Ms, rep.AddedP99Ms, rep.FloorP99Ms, met(rep.FloorMet), rep.Audited)
	}
	if *check && !rep.FloorMet {
		return 1
	}
	return 0
}

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

func runGateway(ctx context.Context, rate int, duration time.Duration, sessions int, dir string, h HTTP) (*gatewayReport, error) {
	if dir == "" {
		d, err := os.MkdirTemp("", "airlock-bench-gateway-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	fake := httptest.NewServer(slacktest.New(slacktest.Options{TeamID: team, Team: "Bench", Domain: "bench", BotUser: botUser, BotID: "B0BENCH", Discard: true}))
	defer fake.Close()
	client := gateway.Client{Name: "bench-agent", Token: gwToken, ActsFor: "U0BENCHREQ",
		Channel: gateway.ChannelRef{Platform: slack.Platform, ID: channelID(0)}, RequestsPerMinute: 1 << 30}
	gw := gateway.Config{Clients: []gateway.Client{client}}
	gw.SetDefaults()
	dsn := filepath.Join(dir, "airlock.db")
	in, err := startInstance(ctx, storage.DriverSQLite, dsn, fake.URL, 0, serverLogger(io.Discard), instanceOptions{gateway: gw})
	if err != nil {
		return nil, err
	}
	defer in.close()
	api := (&gateway.API{Config: gw, Approvals: in.bot.Gateway(), Metrics: in.metrics, Now: time.Now}).Handler()
	apiSrv, apiURL, err := serve(h, h.Handler(in.db, map[string]http.Handler{"/v1/approvals": api, "/v1/approvals/": api}))
	if err != nil {
		return nil, err
	}
	defer apiSrv.Close()
	answer := []byte(`{"id":"b","status":"allowed","args":{},"reason":"no rule asks","decided_by":"policy","expires_at":"2026-01-01T00:00:00Z","card_url":""}` + "\n")
	bareSrv, bareURL, err := serve(h, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer)
	}))
	if err != nil {
		return nil, err
	}
	defer bareSrv.Close()

	hc := newClient(64)
	n := int(duration.Seconds() * float64(rate))
	body := func(i int) []byte {
		return fmt.Appendf(nil, `{"tool":"Read","args":{"file_path":"/srv/app/file-%d.txt"},"session":"s%d","call_id":"c%d"}`, i, i%sessions, i)
	}
	start := time.Now()
	bareLat, apiLat, err := pairs(ctx, n, rate,
		func(i int) (time.Duration, error) { return gwPost(ctx, hc, bareURL+"/v1/approvals", body(i)) },
		func(i int) (time.Duration, error) { return gwPost(ctx, hc, apiURL+"/v1/approvals", body(i)) })
	elapsed := time.Since(start)
	if err != nil {
		return nil, err
	}
	events, err := in.db.AuditEvents(ctx, confirm.AuditFilter{})
	if err != nil {
		return nil, err
	}
	audited := 0
	for _, e := range events {
		if e.Kind == confirm.AuditToolCall && strings.Contains(e.Detail, `"client":"bench-agent"`) {
			audited++
		}
	}
	if audited != n {
		return nil, fmt.Errorf("%d of %d calls audited", audited, n)
	}
	rep := &gatewayReport{Rate: rate, Requests: n, Sessions: sessions, Audited: audited, Database: storage.DriverSQLite,
		BareP50Ms: quantileMs(bareLat, 0.5), BareP99Ms: quantileMs(bareLat, 0.99),
		APIP50Ms: quantileMs(apiLat, 0.5), APIP99Ms: quantileMs(apiLat, 0.99),
		FloorP99Ms: gatewayP99Floor, DurationSecs: elapsed.Seconds()}
	rep.AddedP99Ms = rep.APIP99Ms - rep.BareP99Ms
	rep.FloorMet = rep.AddedP99Ms <= gatewayP99Floor
	return rep, nil
}

// gwPost sends one approval request and reads the whole answer: its
// latency, or an error unless the call came back allowed.
func gwPost(ctx context.Context, hc *http.Client, u string, body []byte) (time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+gwToken)
	req.Header.Set("Content-Type", "application/json")
	sent := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	took := time.Since(sent)
	if err != nil {
		return 0, err
	}
	var a gateway.Approval
	if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &a) != nil || a.Status != gateway.StatusAllowed {
		return 0, fmt.Errorf("HTTP %d: %.200s", resp.StatusCode, raw)
	}
	return took, nil
}
