package card

import (
	"fmt"
	"strconv"

	"github.com/airlockhq/airlock/confirm"
)

// ShowPreviewLabel is the label of "Show full preview".
const ShowPreviewLabel = "Show full preview"

// Preview is a call's dry run as its card shows it (tools[].preview):
// renderers lay out Heading, then Output as inert code (cut to fit, with
// "Show full preview"), then CutNote and RecheckNote when set.
type Preview struct {
	State  confirm.PreviewState
	Output string // scrubbed output (done; its start when Size is more) or error (failed) (untrusted text)
	Hash   string // hex sha256 of the whole scrubbed output (done)
	// Size is the whole scrubbed output's length in bytes (done; 0 when
	// not known): more than len(Output) when Airlock kept only its start.
	Size int64
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

// CutNote says that Airlock kept only the start of a long preview's
// output, how long the whole was and how much of it is shown nowhere
// (not on the card, nor by Show full preview); "" when it kept it all.
// The hash on the card is of the whole output, so a change anywhere in
// it refuses a recheck.
func (p Preview) CutNote() string {
	kept := int64(len(p.Output))
	if p.State != confirm.PreviewDone || p.Size <= kept {
		return ""
	}
	return fmt.Sprintf("The preview's output was %s: Airlock keeps its first %s, so %s left out and shown nowhere. Its sha256 covers the whole output.",
		Bytes(p.Size), Bytes(kept), bytesAre(p.Size-kept))
}

// bytesAre is "1 byte is" or "1,234 bytes are".
func bytesAre(n int64) string {
	if n == 1 {
		return "1 byte is"
	}
	return Bytes(n) + " are"
}

// Bytes counts bytes for people: "1 byte", "16,384 bytes".
func Bytes[N int | int64](n N) string {
	s := strconv.FormatInt(int64(n), 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if n == 1 {
		return s + " byte"
	}
	return s + " bytes"
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
