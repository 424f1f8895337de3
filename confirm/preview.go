package confirm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unicode/utf8"

	"github.com/airlockhq/airlock/redact"
)

// PreviewState is where a call's preview stands (tools[].preview).
type PreviewState string

const (
	PreviewNone    PreviewState = ""        // the call has no preview
	PreviewRunning PreviewState = "running" // started; the card says so
	PreviewDone    PreviewState = "done"    // Output is the preview; Hash its sha256
	PreviewFailed  PreviewState = "failed"  // Output is the scrubbed error
)

// RecheckState is the outcome of a preview run again just before the
// tool (recheck: true).
type RecheckState string

const (
	RecheckNone    RecheckState = ""        // not rechecked
	RecheckMatched RecheckState = "matched" // the same output: the tool ran
	RecheckChanged RecheckState = "changed" // another output: the tool did not run
	RecheckFailed  RecheckState = "failed"  // the recheck did not run: the tool did not run
)

// PreviewInterrupted is a preview's error when the process running it
// ended before it did (a restart runs it again).
const PreviewInterrupted = "interrupted: Airlock restarted while the preview ran"

// Preview is a call's preview as stored: the output the approver saw
// (scrubbed) and its hash, which a yes binds to.
type Preview struct {
	State  PreviewState
	Output string // scrubbed output when done (its first MaxPreviewKept bytes); the scrubbed error when failed
	Hash   string // hex sha256 of the whole scrubbed output when done (Output itself when not cut)
	// Size is the whole scrubbed output's length in bytes when done:
	// more than len(Output) when the stored output was cut. 0 for a
	// preview stored before sizes were (its Output then is all there is).
	Size int64
	// Recheck and RecheckHash are the recheck's outcome and, when it ran,
	// the hash of its output.
	Recheck     RecheckState
	RecheckHash string
}

// MaxPreviewKept is how much of a preview's scrubbed output is stored
// and shown (the tools' output cap, 16 KiB); the hash covers it whole.
const MaxPreviewKept = 16 << 10

// Cut reports whether the stored output is only the start of the
// preview's output.
func (p Preview) Cut() bool { return p.State == PreviewDone && p.Size > int64(len(p.Output)) }

// KeepPreview is the start of a scrubbed output that is stored and shown:
// at most max bytes, cut at a rune boundary and never inside a marker the
// scrubbing left ("[redacted]").
func KeepPreview(s string, max int) string {
	if len(s) <= max {
		return s
	}
	c := max
	for c > 0 && !utf8.RuneStart(s[c]) {
		c--
	}
	if i := strings.LastIndex(s[:c], "["); i >= 0 && strings.HasPrefix(redact.Marker, s[i:c]) && i+len(redact.Marker) > c {
		c = i
	}
	return s[:c]
}

// PreviewHash is the hex sha256 of a preview's (scrubbed) output.
func PreviewHash(output string) string {
	sum := sha256.Sum256([]byte(output))
	return hex.EncodeToString(sum[:])
}

// ShortHash is a hash's first 12 hex digits, for people.
func ShortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// PreviewChangedMessage is the model's result and the run's outcome when
// the recheck found another output than the approved one.
func PreviewChangedMessage(approved, now string) string {
	return "Not executed: the preview changed since it was approved (approved " + ShortHash(approved) + ", now " + ShortHash(now) + "), so the call was not run. Ask again to have the new preview approved."
}

// PreviewRecheckFailedMessage is the outcome when the recheck could not
// run, or there was no approved preview to compare with.
func PreviewRecheckFailedMessage(why string) string {
	return "Not executed: the preview could not be checked again before the run (" + why + "), so the call was not run."
}

// CallKey names one call of a batch.
type CallKey struct {
	BatchID string
	Key     string
}

// PreviewStore records calls' previews.
type PreviewStore interface {
	// FinishPreview records a running preview's end (PreviewDone or
	// PreviewFailed, the output scrubbed; for done the hash of the whole
	// scrubbed output and its size, output its start as KeepPreview cut
	// it, the same as the whole when size is its length). While the call is
	// pending it makes the call's next revision: a button rendered before
	// the preview showed is stale. It reports false when the call's preview
	// was not running (nothing changed).
	FinishPreview(ctx context.Context, batchID, key string, state PreviewState, output, hash string, size int64) (bool, error)
	// RecordRecheck records a recheck's outcome and its output's hash,
	// audited with the approved hash.
	RecordRecheck(ctx context.Context, batchID, key string, state RecheckState, hash string) error
	// RunningPreviews lists the pending calls whose preview is running
	// (a restart left them so).
	RunningPreviews(ctx context.Context) ([]CallKey, error)
}
