package mcptools

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockhq/airlock/tools"
)

var _ tools.Previewer = (*mcpTool)(nil)

// Previews implements tools.Previewer: a tool named in the server's
// previews is previewed by the tool it names; there is no recheck.
func (t *mcpTool) Previews() (bool, bool) { return t.preview != "", false }

// Preview implements tools.Previewer: one tools/call of the preview tool
// with the call's arguments (validated against the previewed tool's
// schema), without an idempotency key, bounded by the preview's default
// timeout or the server's, whichever is shorter. Its output is whole, as
// tools.Previewer says.
func (t *mcpTool) Preview(ctx context.Context, args json.RawMessage) (string, error) {
	if t.preview == "" {
		return "", tools.ErrNoPreview
	}
	if _, err := t.schema.Decode(args); err != nil {
		return "", err
	}
	timeout := min(t.srv.cfg.timeout(), tools.DefaultPreviewTimeout)
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	sess, err := t.srv.session(runCtx)
	if err != nil {
		return "", fmt.Errorf("mcp server %s: %w", t.srv.cfg.Name, err)
	}
	// A preview is in flight too, so a question during it is not taken
	// for another call's; its own questions are declined (no key).
	call := &inflight{tool: t.name}
	done := t.srv.begin(call)
	res, err := sess.CallTool(withCall(runCtx, call), &mcp.CallToolParams{Name: t.preview, Arguments: json.RawMessage(tools.NormalizeArgs(args))})
	done()
	if err != nil {
		return "", fmt.Errorf("mcp server %s: preview %s: %w", t.srv.cfg.Name, t.preview, err)
	}
	out, err := t.wholeResult(res)
	if err != nil {
		return "", err
	}
	if len(out) > tools.MaxPreviewOutput {
		return "", fmt.Errorf("mcp server %s: preview %s: %w: more than %d bytes", t.srv.cfg.Name, t.preview, tools.ErrPreviewTooLarge, tools.MaxPreviewOutput)
	}
	return out, nil
}
