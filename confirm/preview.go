package confirm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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
	Output string // scrubbed output when done; the scrubbed error when failed
	Hash   string // hex sha256 of Output when done
	// Recheck and RecheckHash are the recheck's outcome and, when it ran,
	// the hash of its output.
	Recheck     RecheckState
	RecheckHash string
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
	// PreviewFailed, the output scrubbed, hash for done). While the call is
	// pending it makes the call's next revision: a button rendered before
	// the preview showed is stale. It reports false when the call's preview
	// was not running (nothing changed).
	FinishPreview(ctx context.Context, batchID, key string, state PreviewState, output, hash string) (bool, error)
	// RecordRecheck records a recheck's outcome and its output's hash,
	// audited with the approved hash.
	RecordRecheck(ctx context.Context, batchID, key string, state RecheckState, hash string) error
	// RunningPreviews lists the pending calls whose preview is running
	// (a restart left them so).
	RunningPreviews(ctx context.Context) ([]CallKey, error)
}
