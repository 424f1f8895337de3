package card

import (
	"fmt"

	"github.com/airlockhq/airlock/confirm"
)

// ActShowPreview is "Show full preview": offered while a call waits and
// its preview ended, kept by renderers only where they cut the preview
// (Slack action_id airlock_preview opens a modal; Discord answers with an
// ephemeral message; the terminal has /preview N). Its value well apart
// from the other kinds, which grow from the start.
const ActShowPreview ActionKind = 200

// ShowPreviewLabel is the label of "Show full preview".
const ShowPreviewLabel = "Show full preview"

// Preview is a call's dry run as its card shows it (tools[].preview):
// renderers lay out Heading, then Output as inert code (cut to fit, with
// "Show full preview"), then RecheckNote when set.
type Preview struct {
	State  confirm.PreviewState
	Output string // scrubbed output (done) or error (failed) (untrusted text)
	Hash   string // hex sha256 of Output (done)
	// Recheck is the preview run again just before the tool, and
	// RecheckHash its output's hash.
	Recheck     confirm.RecheckState
	RecheckHash string
}

// Heading is the preview's first line in shared words.
func (p Preview) Heading() string {
	switch p.State {
	case confirm.PreviewRunning:
		return "Preview running…"
	case confirm.PreviewDone:
		return "Preview (dry run), sha256 " + confirm.ShortHash(p.Hash) + ":"
	case confirm.PreviewFailed:
		return "Preview failed (the call can still be decided):"
	}
	return ""
}

// Shown reports whether the preview has output (or an error) to show.
func (p Preview) Shown() bool {
	return p.State == confirm.PreviewDone || p.State == confirm.PreviewFailed
}

// Text is the output to show, "(no output)" for an empty one.
func (p Preview) Text() string {
	if p.Output == "" {
		return "(no output)"
	}
	return p.Output
}

// RecheckNote says what the recheck found; "" when there was none. A
// refused run says so with both hashes.
func (p Preview) RecheckNote() string {
	switch p.Recheck {
	case confirm.RecheckMatched:
		return "Rechecked just before the run: the preview was unchanged."
	case confirm.RecheckChanged:
		return fmt.Sprintf("The preview changed since it was approved (approved %s, now %s), so the call was not run.",
			confirm.ShortHash(p.Hash), confirm.ShortHash(p.RecheckHash))
	case confirm.RecheckFailed:
		return "The preview could not be run again just before the run, so the call was not run."
	}
	return ""
}

// RecheckRefused reports whether the recheck refused the run.
func (p Preview) RecheckRefused() bool {
	return p.Recheck == confirm.RecheckChanged || p.Recheck == confirm.RecheckFailed
}

// PreviewAction is "Show full preview" of call n.
func PreviewAction(ref string, n int) Action {
	return Action{Kind: ActShowPreview, Ref: ref, Label: ShowPreviewLabel, NumberedLabel: fmt.Sprintf("%s [%d]", ShowPreviewLabel, n),
		A11yLabel: fmt.Sprintf("Show the full preview of call %d", n), Row: RowMore}
}
