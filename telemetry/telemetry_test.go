package telemetry

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/airlockhq/airlock/model"
	"github.com/airlockhq/airlock/model/modeltest"
)

// collector is a fake OTLP/HTTP traces receiver on 127.0.0.1.
type collector struct {
	srv      *httptest.Server
	mu       sync.Mutex
	requests []*collectortrace.ExportTraceServiceRequest
	headers  []http.Header
	bad      []string
}

func newCollector(t *testing.T) *collector {
	t.Helper()
	c := &collector{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.srv = &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(c.serve)}}
	c.srv.Start()
	t.Cleanup(c.srv.Close)
	return c
}

func (c *collector) serve(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
		c.bad = append(c.bad, r.Method+" "+r.URL.Path)
		http.NotFound(w, r)
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		c.bad = append(c.bad, "content-type "+ct)
		http.Error(w, "unsupported media type", http.StatusUnsupportedMediaType)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		c.bad = append(c.bad, "read: "+err.Error())
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	req := &collectortrace.ExportTraceServiceRequest{}
	if err := proto.Unmarshal(body, req); err != nil {
		c.bad = append(c.bad, "decode: "+err.Error())
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	c.requests = append(c.requests, req)
	c.headers = append(c.headers, r.Header.Clone())
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// spans lists the received span names, and the service.name of each
// received resource.
func (c *collector) spans() (names, services []string, bad []string, headers []http.Header) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, req := range c.requests {
		for _, rs := range req.ResourceSpans {
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.Key == "service.name" {
					services = append(services, kv.GetValue().GetStringValue())
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					names = append(names, s.Name)
				}
			}
		}
	}
	return names, services, append([]string(nil), c.bad...), append([]http.Header(nil), c.headers...)
}

func TestSetupWithoutEndpointExportsNothing(t *testing.T) {
	col := newCollector(t)
	// Even the SDK's environment variables do not turn exporting on.
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", col.srv.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", col.srv.URL+"/v1/traces")
	ctx := context.Background()
	tp, shutdown, err := Setup(ctx, Config{ServiceName: "ignored"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tp.(noop.TracerProvider); !ok {
		t.Fatalf("provider %T, want a no-op", tp)
	}
	_, span := tp.Tracer(TracerName).Start(ctx, "nothing")
	if span.IsRecording() || span.SpanContext().IsValid() {
		t.Error("a span of the no-op provider records")
	}
	span.End()
	if err := shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if names, _, bad, _ := col.spans(); len(names) != 0 || len(bad) != 0 {
		t.Fatalf("received %v %v", names, bad)
	}
}

func TestSetupExportsOverOTLPHTTPAtShutdown(t *testing.T) {
	col := newCollector(t)
	ctx := context.Background()
	tp, shutdown, err := Setup(ctx, Config{
		OTLPEndpoint: col.srv.URL, // a base URL: /v1/traces is appended
		Headers:      map[string]string{"Authorization": "Bearer collector-token"},
		ServiceName:  "airlock-test",
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tp.(*sdktrace.TracerProvider); !ok {
		t.Fatalf("provider %T, want the SDK's", tp)
	}
	_, span := tp.Tracer(TracerName).Start(ctx, "airlock.turn")
	span.End()
	// The batcher holds the span (it sends every 5 s); shutdown flushes it.
	if names, _, _, _ := col.spans(); len(names) != 0 {
		t.Fatalf("sent before the flush: %v", names)
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	names, services, bad, headers := col.spans()
	if len(bad) != 0 {
		t.Fatalf("bad requests: %v", bad)
	}
	if len(names) != 1 || names[0] != "airlock.turn" {
		t.Fatalf("received spans %v", names)
	}
	if len(services) != 1 || services[0] != "airlock-test" {
		t.Fatalf("service.name %v", services)
	}
	if got := headers[0].Get("Authorization"); got != "Bearer collector-token" {
		t.Fatalf("Authorization header %q", got)
	}
}

func TestSetupDefaultServiceName(t *testing.T) {
	col := newCollector(t)
	ctx := context.Background()
	tp, shutdown, err := Setup(ctx, Config{OTLPEndpoint: col.srv.URL + "/v1/traces"})
	if err != nil {
		t.Fatal(err)
	}
	_, span := tp.Tracer(TracerName).Start(ctx, "x")
	span.End()
	if err := shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	names, services, bad, _ := col.spans()
	if len(bad) != 0 || len(names) != 1 || len(services) != 1 || services[0] != DefaultServiceName {
		t.Fatalf("names %v services %v bad %v", names, services, bad)
	}
}

func TestSetupRefusesABadConfig(t *testing.T) {
	if _, _, err := Setup(context.Background(), Config{OTLPEndpoint: "otel-collector:4318"}); err == nil || !strings.Contains(err.Error(), "telemetry.otlp_endpoint") {
		t.Fatalf("err %v", err)
	}
}

func TestValidateNamesKeysAndHidesSecrets(t *testing.T) {
	const secret = "hunter2-secret"
	for _, tc := range []struct {
		c    Config
		want string
	}{
		{Config{OTLPEndpoint: "otel-collector:4318"}, "telemetry.otlp_endpoint"},
		{Config{OTLPEndpoint: "grpc://collector:4317"}, "telemetry.otlp_endpoint"},
		{Config{OTLPEndpoint: "http://"}, "telemetry.otlp_endpoint"},
		{Config{OTLPEndpoint: "https://user:" + secret + "@collector"}, "telemetry.otlp_endpoint"},
		{Config{OTLPEndpoint: "https://collector/?token=" + secret}, "telemetry.otlp_endpoint"},
		{Config{OTLPEndpoint: "http://c:4318", Headers: map[string]string{"Bad Header": secret}}, "telemetry.headers"},
		{Config{OTLPEndpoint: "http://c:4318", Headers: map[string]string{"Authorization": "Bearer " + secret + "\r\nX: y"}}, "telemetry.headers.Authorization"},
		{Config{OTLPEndpoint: "http://c:4318", Headers: map[string]string{"Content-Type": "application/json"}}, "telemetry.headers.Content-Type"},
		{Config{ServiceName: "  "}, "telemetry.service_name"},
	} {
		err := tc.c.Validate("telemetry")
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%+v: err %v, want one naming %s", tc.c, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error quotes a secret: %v", err)
		}
	}
	for _, ok := range []Config{
		{},
		{OTLPEndpoint: "http://otel-collector:4318", Headers: map[string]string{"Authorization": "Bearer x", "X-Scope-OrgID": "t1"}, ServiceName: "airlock-prod"},
		{OTLPEndpoint: "https://otlp.example.com/otlp/v1/traces"},
	} {
		if err := ok.Validate("telemetry"); err != nil {
			t.Errorf("%+v: %v", ok, err)
		}
	}
}

func TestTracesURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://otel-collector:4318":           "http://otel-collector:4318/v1/traces",
		"http://otel-collector:4318/":          "http://otel-collector:4318/v1/traces",
		"https://otlp.example.com/otlp":        "https://otlp.example.com/otlp/v1/traces",
		"https://otlp.example.com/v1/traces":   "https://otlp.example.com/v1/traces",
		"https://otlp.example.com/v1/traces/":  "https://otlp.example.com/v1/traces",
		"http://127.0.0.1:4318/tenant/a/":      "http://127.0.0.1:4318/tenant/a/v1/traces",
		"https://otlp.example.com/x/v1/traces": "https://otlp.example.com/x/v1/traces",
	} {
		got, err := tracesURL(in)
		if err != nil || got != want {
			t.Errorf("tracesURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func memTracer(t *testing.T) (trace.Tracer, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp.Tracer(TracerName), exp
}

func attrs(s tracetest.SpanStub) map[attribute.Key]string {
	out := map[attribute.Key]string{}
	for _, kv := range s.Attributes {
		out[kv.Key] = kv.Value.String()
	}
	return out
}

func TestProviderRecordsAChatSpanUnderTheCaller(t *testing.T) {
	tracer, exp := memTracer(t)
	const userText, modelText, arg = "usertext-8c1d", "modeltext-2e7f", "argvalue-5a90"
	s := modeltest.NewScripted(model.Message{Text: modelText})
	p := Provider(s, tracer, "openai", "gpt-test")

	ctx, parent := tracer.Start(context.Background(), "airlock.turn")
	msg, err := p.Generate(ctx, model.Request{System: "sys", Messages: []model.Message{{Role: model.RoleUser, Text: userText + " " + arg}}})
	parent.End()
	if err != nil || msg.Text != modelText {
		t.Fatalf("%+v %v", msg, err)
	}
	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("spans %d", len(spans))
	}
	chat := spans[0]
	if chat.Name != "chat gpt-test" || chat.SpanKind != trace.SpanKindClient {
		t.Fatalf("span %q kind %v", chat.Name, chat.SpanKind)
	}
	if chat.Parent.SpanID() != spans[1].SpanContext.SpanID() {
		t.Error("the chat span is not the caller's child")
	}
	want := map[attribute.Key]string{
		AttrGenAIOperation: "chat", AttrGenAISystem: "openai", AttrGenAIRequestModel: "gpt-test",
	}
	got := attrs(chat)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if len(got) != len(want) || chat.Status.Code == codes.Error {
		t.Errorf("attributes %v, status %+v", got, chat.Status)
	}
	for _, v := range got {
		for _, x := range []string{userText, modelText, arg, "sys"} {
			if strings.Contains(v, x) {
				t.Errorf("attribute %q carries %q", v, x)
			}
		}
	}
}

func TestProviderErrorsKeepTheirTextOut(t *testing.T) {
	tracer, exp := memTracer(t)
	const leak = "Incorrect API key provided: sk-abc123"
	s := modeltest.NewScripted().
		PushError(&model.APIError{Status: 401, Message: leak}).
		PushError(errors.New(leak))
	p := Provider(s, tracer, "openai", "")
	for range 2 {
		if _, err := p.Generate(context.Background(), model.Request{}); err == nil {
			t.Fatal("no error")
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Generate(ctx, model.Request{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	spans := exp.GetSpans()
	if len(spans) != 3 {
		t.Fatalf("spans %d", len(spans))
	}
	for i, want := range []string{"401", "_OTHER", "canceled"} {
		s := spans[i]
		if s.Name != "chat" || s.Status.Code != codes.Error {
			t.Errorf("span %d: %q %+v", i, s.Name, s.Status)
		}
		got := attrs(s)
		if got[AttrErrorType] != want {
			t.Errorf("span %d: error.type %q, want %q", i, got[AttrErrorType], want)
		}
		if _, ok := got[AttrGenAIRequestModel]; ok {
			t.Errorf("span %d: a model name was recorded without one", i)
		}
		if strings.Contains(s.Status.Description, "sk-abc123") || len(s.Events) != 0 {
			t.Errorf("span %d carries the error's text: %+v %+v", i, s.Status, s.Events)
		}
	}
}

func TestProviderWithoutTracerIsTheProvider(t *testing.T) {
	s := modeltest.NewScripted()
	if p := Provider(s, nil, "openai", "m"); p != model.Provider(s) {
		t.Fatalf("got %T", p)
	}
}
