package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/airlockhq/airlock/keyerr"
)

// PreviewConfig is a tool's dry run (key `tools[].preview`): a command or
// request, declared read-only by the operator who writes it, run with the
// call's validated arguments before its card waits for a person, so the
// approver sees what would change. Exactly one of Exec and HTTP.
type PreviewConfig struct {
	Exec *ExecConfig `yaml:"exec"`
	HTTP *HTTPConfig `yaml:"http"`
	// OKExitCodes are the exit codes of a preview that succeeded (exec
	// only): its output is then the preview. Empty means [0]. `kubectl
	// diff` exits 1 when there is a difference.
	OKExitCodes []int `yaml:"ok_exit_codes"`
	// Recheck runs the preview again just before the tool runs: a preview
	// whose output changed since the card showed it refuses the run.
	Recheck bool `yaml:"recheck"`
}

// MaxPreviewOutput is the most output a preview may print: the whole
// output (scrubbed) is what its hash covers and what a recheck compares,
// so a longer one fails (ErrPreviewTooLarge) rather than be bound in
// part. The card keeps its first DefaultMaxOutput bytes.
const MaxPreviewOutput = 4 << 20

// ErrPreviewTooLarge: a preview printed more than MaxPreviewOutput.
var ErrPreviewTooLarge = errors.New("the preview's output is too large to be bound to a yes")

// DefaultPreviewTimeout is a preview's timeout when its executor sets
// none; MaxPreviewTimeout the longest one may set.
const (
	DefaultPreviewTimeout = 30 * time.Second
	MaxPreviewTimeout     = 5 * time.Minute
)

// Validate checks the preview's keys; key is its place, e.g.
// "tools[2].preview".
func (p *PreviewConfig) Validate(key string) error {
	if (p.Exec == nil) == (p.HTTP == nil) {
		return keyerr.New(key, "exactly one of http or exec is required")
	}
	if len(p.OKExitCodes) > 0 && p.Exec == nil {
		return keyerr.New(key+".ok_exit_codes", "only for an exec preview")
	}
	for i, code := range p.OKExitCodes {
		if code < 0 || code > 255 {
			return keyerr.New(fmt.Sprintf("%s.ok_exit_codes[%d]", key, i), "must be between 0 and 255, got %d", code)
		}
	}
	if p.Exec != nil {
		if err := p.Exec.Validate(key + ".exec"); err != nil {
			return err
		}
		return checkPreviewTimeout(key+".exec.timeout", p.Exec.Timeout)
	}
	if err := p.HTTP.Validate(key + ".http"); err != nil {
		return err
	}
	return checkPreviewTimeout(key+".http.timeout", p.HTTP.Timeout)
}

func checkPreviewTimeout(key string, d time.Duration) error {
	if d > MaxPreviewTimeout {
		return keyerr.New(key, "at most %s for a preview, got %s", MaxPreviewTimeout, d)
	}
	return nil
}

// Previewer is a tool that previews its calls (tools[].preview, an MCP
// server's previews).
type Previewer interface {
	// Previews reports whether the tool previews its calls, and whether
	// the preview is run again before the tool (recheck).
	Previews() (ok, recheck bool)
	// Preview runs the preview once with the call's arguments (validated
	// as for Run) and returns its whole output, scrubbed, never cut (at
	// most MaxPreviewOutput bytes before scrubbing; a longer output is
	// ErrPreviewTooLarge). It is never gated and never a run of the tool.
	Preview(ctx context.Context, args json.RawMessage) (string, error)
}

// PreviewOf returns the tool's previewer when it previews its calls.
func PreviewOf(t Tool) (Previewer, bool) {
	p, ok := t.(Previewer)
	if !ok {
		return nil, false
	}
	if has, _ := p.Previews(); !has {
		return nil, false
	}
	return p, true
}

// ErrNoPreview: the tool has no preview.
var ErrNoPreview = errors.New("the tool has no preview")

// newPreview compiles a preview that Validate accepted.
func newPreview(key string, p *PreviewConfig, opts Options) (executor, error) {
	if p.Exec != nil {
		cfg := *p.Exec
		if cfg.Timeout == 0 {
			cfg.Timeout = DefaultPreviewTimeout
		}
		e, err := newExecExecutor(key+".exec", &cfg, opts)
		if err != nil {
			return nil, err
		}
		e.okExit = slices.Clone(p.OKExitCodes)
		if len(e.okExit) == 0 {
			e.okExit = []int{0}
		}
		e.whole = MaxPreviewOutput
		return e, nil
	}
	cfg := *p.HTTP
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultPreviewTimeout
	}
	h, err := newHTTPExecutor(key+".http", &cfg, opts)
	if err != nil {
		return nil, err
	}
	h.whole = MaxPreviewOutput
	return h, nil
}

// Previews implements Previewer.
func (t *configTool) Previews() (bool, bool) { return t.preview != nil, t.recheck }

// Preview implements Previewer.
func (t *configTool) Preview(ctx context.Context, args json.RawMessage) (string, error) {
	if t.preview == nil {
		return "", ErrNoPreview
	}
	obj, err := t.decode(args)
	if err != nil {
		return "", err
	}
	return t.preview.run(ctx, normalizeArgs(args), templateData(obj), "")
}
