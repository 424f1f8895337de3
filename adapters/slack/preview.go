package slack

import (
	"strings"
	"unicode/utf8"

	"github.com/slack-go/slack"

	"github.com/airlockhq/airlock/adapters/internal/visible"
	cardpkg "github.com/airlockhq/airlock/card"
)

// PreviewChars and PreviewLines bound the preview shown on the card; a
// longer one is cut with a note, and while the call waits "Show full
// preview" opens it whole in a modal.
const (
	PreviewChars = 1500
	PreviewLines = 25
)

// previewCut reports whether the card cuts the call's preview (to k).
func previewCut(c cardpkg.Call, k caps) bool {
	if c.Preview == nil || !c.Preview.Shown() {
		return false
	}
	_, hidden := previewShown(c.Preview, k)
	return hidden > 0
}

// previewShown is the preview's text as the card shows it (cut to k)
// and how many characters it leaves out.
func previewShown(p *cardpkg.Preview, k caps) (string, int) {
	full := strings.TrimRight(p.Text(), "\n")
	if k.preview == 0 {
		return "", utf8.RuneCountInString(visible.Reveal(full))
	}
	return visible.Preview(full, k.preview, k.previewLines)
}

// previewActions drops "Show full preview" where the card shows it whole.
func previewActions(acts []cardpkg.Action, c cardpkg.Call, k caps) []cardpkg.Action {
	if previewCut(c, k) {
		return acts
	}
	return cardpkg.Without(acts, cardpkg.ActShowPreview)
}

// previewElements lay out a call's preview: its heading, its output as
// preformatted rich text (literal: nothing in it is a mention, a link or
// markup; hidden characters shown as escapes), cut to fit with a note,
// what Airlock left out of a long one, and what the recheck found.
func previewElements(c cardpkg.Call, k caps) []slack.RichTextElement {
	p := c.Preview
	if p == nil {
		return nil
	}
	els := []slack.RichTextElement{slack.NewRichTextSection(rtText(p.Heading(), bold))}
	if p.Shown() {
		text, hidden := previewShown(p, k)
		if text == "" && k.preview > 0 {
			text = " "
		}
		if text != "" {
			els = append(els, &slack.RichTextPreformatted{Type: slack.RTEPreformatted, Elements: []slack.RichTextSectionElement{rtText(text, nil)}})
		}
		if hidden > 0 {
			// Actions offers Show full preview while a person may decide.
			note := cardpkg.PreviewCut(hidden, c.Flagged && c.Open(), c.Number)
			els = append(els, slack.NewRichTextSection(rtText(wordsOf(note), italic)))
		}
		if n := p.CutNote(); n != "" {
			els = append(els, slack.NewRichTextSection(rtText(n, italic)))
		}
	}
	if n := p.RecheckNote(); n != "" {
		mark := "arrows_counterclockwise"
		if p.RecheckRefused() {
			mark = "no_entry_sign"
		}
		els = append(els, slack.NewRichTextSection(emoji(mark), rtText(" "+n, bold)))
	}
	return els
}

// PreviewModal shows a call's whole preview (card.PreviewView: as
// Airlock kept it, saying so when it kept only its start), read-only and
// literal, in preformatted rich text of at most maxModalArgs characters
// a block.
func PreviewModal(call cardpkg.Call) slack.ModalViewRequest {
	v := cardpkg.PreviewView(call)
	head := viewHead(v)
	text := ""
	if p := call.Preview; p != nil {
		head = append(head, slack.NewRichTextSection(rtText(p.Heading(), bold)))
		if n := p.CutNote(); n != "" {
			head = append(head, slack.NewRichTextSection(rtText(n, italic)))
		}
		if p.Shown() {
			text = p.Text()
		}
	}
	return readOnlyModal(CallbackPreview, v, head, text, "preview_")
}
