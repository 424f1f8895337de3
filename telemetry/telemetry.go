// Package telemetry owns Airlock's OpenTelemetry traces: the exporter setup
// (OTLP over HTTP, only when an endpoint is configured) and the model
// provider wrapper that records one span per model call; the bot records
// its own spans with the tracer it is given. Spans carry ids, names and
// outcomes, never secrets or content.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"golang.org/x/net/http/httpguts"

	"github.com/airlockhq/airlock/keyerr"
)

// DefaultServiceName is the service.name of the exported resource when
// telemetry.service_name is not set.
const DefaultServiceName = "airlock"

// TracerName is the instrumentation scope of Airlock's spans: pass
// tp.Tracer(TracerName) to bot.Config.Tracer and Provider.
const TracerName = "github.com/airlockhq/airlock"

// TracesPath is the OTLP/HTTP path of traces, appended to an endpoint given
// as a base URL.
const TracesPath = "/v1/traces"

// Config is the telemetry section of the config.
type Config struct {
	// OTLPEndpoint is the collector's OTLP/HTTP base URL, e.g.
	// http://otel-collector:4318 (spans go to <endpoint>/v1/traces; a URL
	// already ending in /v1/traces is used as it is). Empty: no traces
	// are exported.
	OTLPEndpoint string `yaml:"otlp_endpoint"`
	// Headers are sent with every export (e.g. an Authorization header).
	// Their values are secrets: never logged, never in an error.
	Headers map[string]string `yaml:"headers"`
	// ServiceName is the resource's service.name; default "airlock".
	ServiceName string `yaml:"service_name"`
}

// Enabled reports whether spans are exported.
func (c Config) Enabled() bool { return strings.TrimSpace(c.OTLPEndpoint) != "" }

// Validate checks the section; key is its name in the config ("telemetry"),
// used to name the bad key in a *keyerr.Error. Errors never quote the
// endpoint or a header value, which may hold credentials.
func (c Config) Validate(key string) error {
	if ep := strings.TrimSpace(c.OTLPEndpoint); ep != "" {
		if _, err := tracesURL(ep); err != nil {
			return keyerr.Wrap(key+".otlp_endpoint", err)
		}
	}
	names := make([]string, 0, len(c.Headers))
	for name := range c.Headers {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !httpguts.ValidHeaderFieldName(name) {
			return keyerr.New(key+".headers", "%q is not a valid HTTP header name", name)
		}
		switch strings.ToLower(name) {
		case "content-type", "content-encoding", "content-length":
			return keyerr.New(key+".headers."+name, "set by the exporter; remove it")
		}
		if strings.ContainsAny(c.Headers[name], "\r\n\x00") {
			return keyerr.New(key+".headers."+name, "the value must not contain line breaks or NUL")
		}
	}
	if c.ServiceName != "" && strings.TrimSpace(c.ServiceName) == "" {
		return keyerr.New(key+".service_name", "blank; leave it out for %q", DefaultServiceName)
	}
	return nil
}

// serviceName is the configured service name or the default.
func (c Config) serviceName() string {
	if s := strings.TrimSpace(c.ServiceName); s != "" {
		return s
	}
	return DefaultServiceName
}

// tracesURL turns the configured endpoint into the URL spans are posted to.
func tracesURL(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return "", errors.New("not a URL")
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return "", errors.New("must be an http:// or https:// URL, like http://otel-collector:4318")
	case u.Host == "":
		return "", errors.New("has no host")
	case u.User != nil:
		return "", errors.New("must not carry credentials; put them in headers")
	case u.RawQuery != "" || u.Fragment != "":
		return "", errors.New("must not have a query or fragment")
	}
	p := strings.TrimRight(u.Path, "/")
	if !strings.HasSuffix(p, TracesPath) {
		p += TracesPath
	}
	u.Path, u.RawPath = p, ""
	return u.String(), nil
}

// Setup returns the tracer provider the process uses and a shutdown
// function that flushes spans not yet exported (call it at exit, with a
// deadline). With an endpoint, spans are batched and sent over OTLP/HTTP
// (protobuf) to it, under a resource named service_name. Without one the
// provider is a no-op: nothing is recorded, exported or dialled, and
// shutdown does nothing. No network is touched here either way.
func Setup(ctx context.Context, c Config) (trace.TracerProvider, func(context.Context) error, error) {
	if err := c.Validate("telemetry"); err != nil {
		return nil, nil, err
	}
	if !c.Enabled() {
		return noop.NewTracerProvider(), func(context.Context) error { return nil }, nil
	}
	target, err := tracesURL(strings.TrimSpace(c.OTLPEndpoint))
	if err != nil {
		return nil, nil, fmt.Errorf("telemetry.otlp_endpoint: %w", err)
	}
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(target)}
	if len(c.Headers) > 0 {
		opts = append(opts, otlptracehttp.WithHeaders(c.Headers))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("telemetry: OTLP exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(attribute.String("service.name", c.serviceName())))
	if err != nil {
		return nil, nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return tp, tp.Shutdown, nil
}
