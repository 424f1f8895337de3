package slack

import (
	"context"
	"sync"
	"time"

	"github.com/slack-go/slack"

	"github.com/airlockhq/airlock/adapters/internal/visible"
	cardpkg "github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
)

// Grants. "Allow for 1h" on a call allows it and grants later calls of its
// tool in the thread for that long; the bot then posts a grant notice
// (PostGrantNotice): who granted which tool until when, with a Revoke
// button while the grant is active. Revoke (any approver of the channel)
// updates the notice to say who revoked it, without the button.

// RenderGrantNotice returns the Block Kit blocks of a grant notice: who
// granted which tool in the thread until when (people as user elements,
// times as date elements, the tool's name literal), who revoked it and
// when once revoked, and while it is active at now a Revoke button (no
// style) carrying the grant's opaque reference.
func RenderGrantNotice(n cardpkg.GrantNotice, now time.Time) []slack.Block {
	nt := n.Notice(now)
	blocks := []slack.Block{slack.NewRichTextBlock("grant", noticeSection(nt.Lines, fullCaps))}
	if len(nt.Foot.Parts) > 0 {
		revoke := slack.NewButtonBlockElement(ActionRevokeGrant, n.Ref, plain(cardpkg.RevokeLabel))
		revoke.AccessibilityLabel = clip(n.RevokeA11yLabel(func(t string) string { return clip(oneLine(revealClip(t, 40)), 40) }), 75)
		blocks = append(blocks,
			slack.NewActionBlock("grant_actions", revoke),
			slack.NewContextBlock("grant_footer", mrkdwn(faceText(nt.Foot))),
		)
	}
	return blocks
}

// GrantNoticeText is a grant notice's plain text (notifications, clients
// without Block Kit): the notice's shared words, escaped, so user ids in
// it are plain text and ping nobody. The tool's name and the people are
// names, not prose: every hidden character in them is shown escaped, the
// zero-width (non-)joiners too, so "dep\u200cloy" never reads as "deploy".
func GrantNoticeText(n cardpkg.GrantNotice) string {
	n.Tool, n.By, n.For, n.RevokedBy = visible.Reveal(n.Tool), visible.Reveal(n.By), visible.Reveal(n.For), visible.Reveal(n.RevokedBy)
	return clip(postText(n.Text()), 3000)
}

// date is a time as a date element: each reader sees it in their own time
// zone; the fallback is UTC.
func date(t time.Time, format string) []slack.RichTextSectionElement {
	if t.IsZero() {
		return []slack.RichTextSectionElement{rtText(cardpkg.UnknownTime, nil)}
	}
	fallback := t.UTC().Format("2006-01-02 15:04 UTC")
	return []slack.RichTextSectionElement{slack.NewRichTextSectionDateElement(t.Unix(), format, nil, &fallback)}
}

// GrantStore is what the adapter may use of storage to say whose grant
// allowed a call: the store New gets is asked when it has this method.
type GrantStore interface {
	Grant(ctx context.Context, id string) (*confirm.Grant, error)
}

// grantNames remembers who granted each grant (it never changes), from
// the notices posted and from storage when it can be asked.
type grantNames struct {
	store GrantStore // nil: only the notices this process posted are known

	mu  sync.Mutex
	who map[string]string
}

// maxGrantNames bounds the memory; past it, it starts over.
const maxGrantNames = 1024

func (g *grantNames) remember(id, by string) {
	if id == "" || by == "" {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.who == nil || len(g.who) >= maxGrantNames {
		g.who = map[string]string{}
	}
	g.who[id] = by
}

// of maps the grants that allowed calls of the card to who granted them,
// as far as known; a grant not found is named by its id on the card.
func (g *grantNames) of(ctx context.Context, c cardpkg.Card) map[string]string {
	var out map[string]string
	for _, call := range c.Calls {
		id := call.State.GrantID
		if call.State.Kind != cardpkg.AllowedByGrant || id == "" {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		if _, done := out[id]; done {
			continue
		}
		g.mu.Lock()
		by := g.who[id]
		g.mu.Unlock()
		if by == "" && g.store != nil {
			if gr, err := g.store.Grant(ctx, id); err == nil && gr != nil {
				by = gr.CreatedBy
				g.remember(id, by)
			}
		}
		out[id] = by
	}
	return out
}
