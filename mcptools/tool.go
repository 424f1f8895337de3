package mcptools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"syscall"
	"text/template"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockhq/airlock/model"
	"github.com/airlockhq/airlock/tools"
)

// IdempotencyMetaKey is the _meta key of a call's idempotency key
// ("<batch id>/<call key>"), for servers that deduplicate.
const IdempotencyMetaKey = "dev.airlock/idempotency-key"

// maxDescriptionRunes caps a server's tool description.
const maxDescriptionRunes = 4000

// maxErrorText caps the text of an isError result kept in the error.
const maxErrorText = 2000

// ToolError is a result the server marked isError: the call ran and failed.
type ToolError struct {
	Server, Tool string
	Text         string
}

func (e *ToolError) Error() string { return e.Text }

// mcpTool is one tool of an MCP server.
type mcpTool struct {
	srv         *server
	name        string // <server>__<tool>
	remote      string // the server's name
	title       string
	description string
	schema      *tools.Schema
	summary     *template.Template // nil: the default summary
	confirm     bool
	why         string
	readOnly    bool
	destructive bool
	preview     string // the server's tool previewing calls (mcp_servers[].previews); "": none
}

var _ tools.Tool = (*mcpTool)(nil)

func (s *server) newTool(mt *mcp.Tool) (*mcpTool, error) {
	if mt.Name == "" {
		return nil, errors.New("no name")
	}
	name := s.cfg.ToolName(mt.Name)
	if !joinedNamePattern.MatchString(name) || !tools.ValidName(name) {
		return nil, fmt.Errorf("name %q: must match %s", name, joinedNamePattern)
	}
	raw, err := json.Marshal(mt.InputSchema)
	if err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	schema, err := tools.CompileSchema(raw)
	if err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	t := &mcpTool{
		srv:         s,
		name:        name,
		remote:      mt.Name,
		title:       mt.Title,
		description: mt.Description,
		schema:      schema,
		summary:     s.summaries[mt.Name],
		preview:     s.cfg.Previews[mt.Name],
		destructive: true, // MCP's default
	}
	if a := mt.Annotations; a != nil {
		if t.title == "" {
			t.title = a.Title
		}
		t.readOnly = a.ReadOnlyHint
		switch {
		case a.DestructiveHint != nil:
			t.destructive = *a.DestructiveHint
		case a.ReadOnlyHint:
			t.destructive = false // meaningless for a read-only tool
		}
	}
	switch {
	case !s.cfg.confirm():
		t.confirm, t.why = false, "server confirm: false"
	case s.cfg.TrustAnnotations && t.readOnly:
		t.confirm, t.why = false, "annotated readOnlyHint, trusted (trust_annotations: true)"
	case s.cfg.TrustAnnotations:
		t.confirm, t.why = true, "server confirm: true; not annotated readOnlyHint"
	default:
		t.confirm, t.why = true, "server confirm: true; annotations not trusted"
	}
	return t, nil
}

func (t *mcpTool) info() Info {
	return Info{
		Name: t.name, Server: t.srv.cfg.Name, Tool: t.remote, Title: t.title, Description: t.description,
		ReadOnlyHint: t.readOnly, DestructiveHint: t.destructive, Gated: t.confirm, Why: t.why,
	}
}

// displayName is the tool's title, else its name on the server.
func (t *mcpTool) displayName() string {
	if t.title != "" {
		return t.title
	}
	return t.remote
}

// Spec implements tools.Tool: the description is the server's, after the
// server's name in brackets; the parameters are the tool's inputSchema.
func (t *mcpTool) Spec() model.ToolSpec {
	desc := t.description
	if desc == "" {
		desc = t.displayName()
	}
	return model.ToolSpec{
		Name:        t.name,
		Description: "[" + t.srv.cfg.Name + "] " + tools.CapRunes(desc, maxDescriptionRunes),
		Parameters:  t.schema.JSON(),
	}
}

// Confirm implements tools.Tool.
func (t *mcpTool) Confirm() bool { return t.confirm }

// Validate implements tools.Tool: the arguments must match the inputSchema;
// every error wraps tools.ErrInvalidArgs.
func (t *mcpTool) Validate(args json.RawMessage) error {
	_, err := t.schema.Decode(args)
	return err
}

// Summary implements tools.Tool: the configured summary, else the title (or
// name) with the arguments.
func (t *mcpTool) Summary(args json.RawMessage) (string, error) {
	obj, err := t.schema.Decode(args)
	if err != nil {
		return "", err
	}
	return tools.RenderSummary(t.displayName(), t.summary, t.schema.Properties(), obj)
}

// Run implements tools.Tool: one tools/call with the arguments as sent and
// the idempotency key in _meta, bounded by the server's timeout. A failure
// once the request may have reached the server wraps tools.ErrOutcomeUnknown;
// nothing is retried.
func (t *mcpTool) Run(ctx context.Context, args json.RawMessage, idempotencyKey string) (string, error) {
	if _, err := t.schema.Decode(args); err != nil {
		return "", err
	}
	timeout := t.srv.cfg.timeout()
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	dl := newDeadline(timeout, func() { cancel(errCallTimeout) })
	defer dl.stop()
	sess, err := t.srv.session(runCtx)
	if err != nil {
		return "", fmt.Errorf("mcp server %s: %w", t.srv.cfg.Name, err)
	}
	params := &mcp.CallToolParams{Name: t.remote, Arguments: json.RawMessage(tools.NormalizeArgs(args))}
	if idempotencyKey != "" {
		params.Meta = mcp.Meta{IdempotencyMetaKey: idempotencyKey}
	}
	call := &inflight{tool: t.name, key: idempotencyKey, dl: dl}
	callCtx, st := withCallState(withCall(runCtx, call))
	done := t.srv.begin(call)
	res, err := sess.CallTool(callCtx, params)
	done()
	if err != nil {
		return "", t.failure(ctx, runCtx, st.sent.Load(), timeout, err)
	}
	return t.result(res)
}

// failure is the error of a call that got no result: an ordinary error when
// the server answered with a JSON-RPC error or nothing was sent, else one
// wrapping tools.ErrOutcomeUnknown.
func (t *mcpTool) failure(ctx, runCtx context.Context, sent bool, timeout time.Duration, err error) error {
	op := fmt.Sprintf("mcp server %s: tools/call %s", t.srv.cfg.Name, t.remote)
	timedOut := ctx.Err() == nil && errors.Is(context.Cause(runCtx), errCallTimeout)
	if serverAnswered(err) {
		return fmt.Errorf("%s: %w", op, err)
	}
	if !sent {
		if timedOut {
			return fmt.Errorf("%s: nothing sent within %s: %w", op, timeout, err)
		}
		return fmt.Errorf("%s: %w", op, err)
	}
	var what string
	switch {
	case timedOut:
		what = fmt.Sprintf("no answer within %s", timeout)
	case ctx.Err() != nil:
		what = "context ended after the request was sent"
	case errors.Is(err, mcp.ErrConnectionClosed), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		what = "connection lost after the request was sent"
	default:
		what = "failed after the request was sent"
	}
	return fmt.Errorf("%w: %s: %s: %w", tools.ErrOutcomeUnknown, op, what, err)
}

// Codes of the SDK's own JSON-RPC errors: closing connections and a
// transport's refusal. Any other code came from the server.
const (
	codeClientClosing = -32003
	codeServerClosing = -32004
	codeRejected      = -32005
)

// serverAnswered reports whether err holds a JSON-RPC error the server sent:
// a clear answer, the call did not run (e.g. unknown tool, invalid params).
func serverAnswered(err error) bool {
	found := false
	var walk func(error)
	walk = func(e error) {
		if e == nil || found {
			return
		}
		if we, ok := e.(*jsonrpc.Error); ok {
			switch we.Code {
			case codeClientClosing, codeServerClosing, codeRejected:
			default:
				found = true
				return
			}
		}
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		case interface{ Unwrap() []error }:
			for _, c := range u.Unwrap() {
				walk(c)
			}
		}
	}
	walk(err)
	return found
}

// result turns a call's result into the tool's output: text content in
// order, other content named, structuredContent as JSON (unless a text
// already holds it), scrubbed and capped; isError makes it a *ToolError.
func (t *mcpTool) result(res *mcp.CallToolResult) (string, error) {
	out, err := t.wholeResult(res)
	if err != nil {
		return "", err
	}
	return tools.CapOutput([]byte(out), tools.DefaultMaxOutput, t.srv.m.redact), nil
}

// wholeResult is result scrubbed but not capped (a preview's output,
// bound whole).
func (t *mcpTool) wholeResult(res *mcp.CallToolResult) (string, error) {
	var parts []string
	var texts []string
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			parts = append(parts, c.Text)
			texts = append(texts, c.Text)
		case *mcp.ImageContent:
			parts = append(parts, fmt.Sprintf("[image: %s, %d bytes]", label(c.MIMEType), len(c.Data)))
		case *mcp.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio: %s, %d bytes]", label(c.MIMEType), len(c.Data)))
		case *mcp.ResourceLink:
			parts = append(parts, fmt.Sprintf("[resource link: %s]", label(c.URI)))
		case *mcp.EmbeddedResource:
			if r := c.Resource; r != nil {
				parts = append(parts, fmt.Sprintf("[resource: %s, %s, %d bytes]", label(r.URI), label(r.MIMEType), len(r.Text)+len(r.Blob)))
			} else {
				parts = append(parts, "[resource]")
			}
		case nil:
		default:
			parts = append(parts, fmt.Sprintf("[%s content]", strings.TrimPrefix(fmt.Sprintf("%T", c), "*mcp.")))
		}
	}
	if res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil && !holdsJSON(texts, b) {
			parts = append(parts, string(b))
		}
	}
	// Scrubbed after joining (a secret split across two parts is found)
	// and before the cap (none is left in part at the cut).
	r := t.srv.m.redact
	out := r.Join(parts, "\n")
	if res.IsError {
		if strings.TrimSpace(out) == "" {
			out = "the tool reported an error"
		}
		if len(out) > maxErrorText {
			out = r.Prefix(out, maxErrorText-len("…")) + "…"
		}
		return "", &ToolError{Server: t.srv.cfg.Name, Tool: t.remote, Text: out}
	}
	return out, nil
}

// holdsJSON reports whether one of texts is the JSON value b.
func holdsJSON(texts []string, b []byte) bool {
	var want any
	if json.Unmarshal(b, &want) != nil {
		return false
	}
	for _, s := range texts {
		var got any
		if json.Unmarshal([]byte(s), &got) == nil && reflect.DeepEqual(got, want) {
			return true
		}
	}
	return false
}

// label is a server-given name (a MIME type, a URI) fit for one line.
func label(s string) string {
	if s == "" {
		return "unknown"
	}
	s = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return -1
		}
		return r
	}, s)
	return tools.CapRunes(s, 200)
}
