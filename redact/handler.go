package redact

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
)

// NewHandler returns a slog.Handler that redacts every record before h
// sees it: the message, each attribute's key and value (of any kind:
// strings, errors, fmt.Stringers, LogValuers, numbers, other values as
// they would print), in groups too, and the attributes and group names
// given to WithAttrs and WithGroup. With a nil or empty r it returns h.
func NewHandler(h slog.Handler, r *Redactor) slog.Handler {
	if r == nil || len(r.secrets) == 0 {
		return h
	}
	return &handler{h: h, r: r}
}

type handler struct {
	h slog.Handler
	r *Redactor
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.h.Enabled(ctx, l) }

func (h *handler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.r.String(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.h.Handle(ctx, out)
}

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	scrubbed := make([]slog.Attr, len(as))
	for i, a := range as {
		scrubbed[i] = h.attr(a)
	}
	return &handler{h: h.h.WithAttrs(scrubbed), r: h.r}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{h: h.h.WithGroup(h.r.String(name)), r: h.r}
}

func (h *handler) attr(a slog.Attr) slog.Attr {
	return slog.Attr{Key: h.r.String(a.Key), Value: h.value(a.Value)}
}

func (h *handler) value(v slog.Value) slog.Value {
	v = v.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.StringValue(h.r.String(v.String()))
	case slog.KindGroup:
		as := v.Group()
		out := make([]slog.Attr, len(as))
		for i, a := range as {
			out[i] = h.attr(a)
		}
		return slog.GroupValue(out...)
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			if s := x.Error(); h.r.String(s) != s {
				return slog.StringValue(h.r.String(s))
			}
			return v
		case fmt.Stringer:
			if s := x.String(); h.r.String(s) != s {
				return slog.StringValue(h.r.String(s))
			}
			return v
		}
		// Kept as it is (a JSON log keeps its structure) unless a secret
		// shows in how a text or a JSON handler would print it.
		s := fmt.Sprintf("%+v", v.Any())
		if h.r.String(s) != s {
			return slog.StringValue(h.r.String(s))
		}
		if b, err := json.Marshal(v.Any()); err == nil && h.r.String(string(b)) != string(b) {
			return slog.StringValue(h.r.String(s))
		}
		return v
	default: // numbers, bools, durations, times
		if s := v.String(); h.r.String(s) != s {
			return slog.StringValue(h.r.String(s))
		}
		return v
	}
}

// JSON returns the JSON text raw with secrets redacted by scrub (e.g.
// (*Redactor).String), still valid JSON when raw is: the text is scrubbed
// as it is, and if that broke it (a secret outside a string, such as a
// number), the decoded value is, strings and keys scrubbed, numbers that
// held a secret turned into strings, and encoded again. raw is returned
// unchanged when it holds no secret.
func JSON(raw []byte, scrub func(string) string) []byte {
	if scrub == nil || len(raw) == 0 {
		return raw
	}
	s := scrub(string(raw))
	if s == string(raw) {
		return raw
	}
	if json.Valid([]byte(s)) || !json.Valid(raw) {
		return []byte(s)
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return []byte(s)
	}
	b, err := json.Marshal(scrubValue(v, scrub))
	if err != nil {
		return []byte(s)
	}
	return b
}

func scrubValue(v any, scrub func(string) string) any {
	switch v := v.(type) {
	case string:
		return scrub(v)
	case json.Number:
		if s := scrub(v.String()); s != v.String() {
			return s
		}
		return v
	case []any:
		for i := range v {
			v[i] = scrubValue(v[i], scrub)
		}
		return v
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, x := range v {
			m[scrub(k)] = scrubValue(x, scrub)
		}
		return m
	}
	return v
}
