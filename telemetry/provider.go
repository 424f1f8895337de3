package telemetry

import (
	"context"
	"errors"
	"net"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/airlockhq/airlock/model"
)

// GenAI semantic-convention attribute keys of a model call's span.
const (
	AttrGenAIOperation    = attribute.Key("gen_ai.operation.name")
	AttrGenAISystem       = attribute.Key("gen_ai.system")
	AttrGenAIRequestModel = attribute.Key("gen_ai.request.model")
	AttrErrorType         = attribute.Key("error.type")
)

// Provider wraps a model provider so each Generate is a client span named
// "chat <model>" (or "chat" without a model name) with gen_ai.operation.name
// "chat", gen_ai.system (system: the provider's name, e.g. "openai",
// "gemini") and gen_ai.request.model. A failed call gets error status and
// error.type (the HTTP status of a provider's API error, "canceled",
// "timeout", "network" or "_OTHER"); the error's text is not recorded, as it
// may quote the request. No prompt, message, tool argument or answer is
// recorded. The span is the context of the call, so it is the child of the
// bot's turn or resume span. model.Message carries neither finish reasons
// nor token usage, so gen_ai.response.finish_reasons and gen_ai.usage.* are
// not set. A nil tracer returns p unchanged.
//
// Wrapped outside model.WithRetryPolicy (as metrics.Provider is), one span
// covers a call with its retries; inside it, each try is a span.
func Provider(p model.Provider, tracer trace.Tracer, system, modelName string) model.Provider {
	if tracer == nil || p == nil {
		return p
	}
	name := "chat"
	if modelName != "" {
		name += " " + modelName
	}
	attrs := []attribute.KeyValue{AttrGenAIOperation.String("chat")}
	if system != "" {
		attrs = append(attrs, AttrGenAISystem.String(system))
	}
	if modelName != "" {
		attrs = append(attrs, AttrGenAIRequestModel.String(modelName))
	}
	return &tracedProvider{p: p, tracer: tracer, name: name, attrs: attrs}
}

type tracedProvider struct {
	p      model.Provider
	tracer trace.Tracer
	name   string
	attrs  []attribute.KeyValue
}

var _ model.Provider = (*tracedProvider)(nil)

func (t *tracedProvider) Generate(ctx context.Context, req model.Request) (model.Message, error) {
	ctx, span := t.tracer.Start(ctx, t.name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(t.attrs...))
	defer span.End()
	msg, err := t.p.Generate(ctx, req)
	if err != nil {
		span.SetAttributes(AttrErrorType.String(errorType(err)))
		span.SetStatus(codes.Error, "model request failed")
	}
	return msg, err
}

// errorType classifies a model error for error.type without its text.
func errorType(err error) string {
	var ae *model.APIError
	var ne net.Error
	switch {
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.As(err, &ae) && ae.Status > 0:
		return strconv.Itoa(ae.Status)
	case errors.As(err, &ne):
		if ne.Timeout() {
			return "timeout"
		}
		return "network"
	}
	return "_OTHER"
}
