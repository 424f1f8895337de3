package slack

import (
	"strings"

	"github.com/airlockhq/airlock/adapters/internal/visible"
)

// Escaping: everything a model, a tool or a chat message wrote is shown
// as inert text.
//
//   - On cards and modals it goes in rich_text text elements, which Slack
//     shows literally (no mrkdwn, links, mentions or emoji shortcodes),
//     after revealClip writes characters that would act unseen (bidi
//     controls, zero-width and other format characters, controls) as
//     visible escapes such as \u202e. Airlock inserts no characters of
//     its own.
//   - In mrkdwn (Airlock's own texts, and answers posted with Post) it is
//     escaped: &, < and > become entities, so nothing in it is a mention,
//     a broadcast (<!channel>, <!here>, <!subteam^…>), a link or a date.

var escaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// escape makes text inert for Slack's mrkdwn entities: no mentions,
// broadcasts or links.
func escape(s string) string { return escaper.Replace(s) }

// escapeClip escapes s and keeps at most n characters of the result,
// cutting between source characters (never inside an entity) and ending a
// cut text with "…".
func escapeClip(s string, n int) string {
	return visible.ClipPieces(s, n, func(r rune) string { return escape(string(r)) })
}

// revealClip writes s's hidden characters as visible escapes and keeps at
// most n characters of the result, cutting between source characters
// (never inside an escape) and ending a cut text with "…". Its result is
// for rich_text and plain_text, which Slack shows literally.
func revealClip(s string, n int) string {
	return visible.ClipPieces(s, n, func(r rune) string {
		if visible.Hidden(r) {
			return visible.Escape(r)
		}
		return string(r)
	})
}

// postText is an answer or notice as Post sends it: mrkdwn whose
// entities are escaped, with bidi and invisible characters shown
// escaped (the zero-width joiners emoji need are kept).
func postText(s string) string { return escape(visible.RevealProse(s)) }
