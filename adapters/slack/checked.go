package slack

import (
	"github.com/slack-go/slack"

	cardpkg "github.com/airlockhq/airlock/card"
)

// Unknown outcomes. A run whose outcome is unknown gates its tool in the
// thread until a person marks it checked. A call no card shows (it ran
// without approval) gets a thread line (PostUnknownNotice) with "I checked
// — go on" (action_id airlock_checked, value its confirm.CheckedRef); a
// carded call has the button on its card. The click is the bot's to judge
// (an approver of the channel); the line is then updated to say who
// checked it and when, without the button.

// RenderUnknownNotice returns the Block Kit blocks of an unknown outcome's
// thread line: which call (its tool's name and read-back literal), that it
// may or may not have happened, and while nobody checked it, that every
// call of its tool needs a yes and the "I checked — go on" button; once
// checked, who checked it and when.
func RenderUnknownNotice(n cardpkg.UnknownNotice) []slack.Block {
	nt := n.Notice()
	secs := []slack.RichTextElement{noticeSection(nt.Lines, fullCaps)}
	if s := oneLine(nt.Quote); s != "" {
		secs = append(secs, richQuote(revealClip(s, maxSummaryChars)))
	}
	blocks := []slack.Block{slack.NewRichTextBlock("unknown", secs...)}
	if k := n.Check; !k.Done() && k.Ref != "" {
		blocks = append(blocks,
			actionsBlock("unknown_actions", []cardpkg.Action{cardpkg.CheckAction(k.Ref, n.Number)}),
			slack.NewContextBlock("unknown_footer", mrkdwn(faceText(nt.Foot))),
		)
	}
	return blocks
}

// UnknownNoticeText is the line's plain text (notifications, clients
// without Block Kit; card.UnknownNotice.Fallback): Airlock's words, the
// tool's name only when it is a plain name, no read-back and no user id,
// so it pings nobody.
func UnknownNoticeText(n cardpkg.UnknownNotice) string {
	return clip(postText(n.Fallback()), 3000)
}
