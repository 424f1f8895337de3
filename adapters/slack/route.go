package slack

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/slack-go/slack"

	"github.com/airlockhq/airlock/bot"
	cardpkg "github.com/airlockhq/airlock/card"
)

// Routing (bot.Router). With an approvals channel the card is posted
// there as a new message and the conversation's thread gets a pointer: a
// short message without buttons, "Waiting for approval in #approvals"
// with a link to the card, edited to the outcome. With notify: [dm] each
// approver also gets a copy of the card in a DM (conversations.open,
// scope im:write). Links are Slack permalinks (chat.getPermalink, no
// scope). A channel reference (<#C…>) notifies nobody; people stay user
// elements as on cards, and the pointer's plain text names nobody.

// Link implements bot.Router: the permalink of a message Airlock posted
// (ref as PostCard or PostPointer returned it), or of the thread's root
// message when ref is "". A thread without a root message (the top of a
// DM) has no link.
func (a *Adapter) Link(ctx context.Context, th bot.Thread, ref string) (string, error) {
	var ch, ts string
	if ref == "" {
		if !channelIDPattern.MatchString(th.Channel) || !tsPattern.MatchString(th.Thread) {
			return "", fmt.Errorf("slack: link: %q/%q is no thread with a root message", clip(th.Channel, 40), clip(th.Thread, 40))
		}
		ch, ts = th.Channel, th.Thread
	} else {
		// A card over several messages is linked to its first.
		first, _, _ := strings.Cut(ref, ",")
		var err error
		if ch, ts, err = ParseCardRef(first); err != nil {
			return "", fmt.Errorf("slack: link: %w", err)
		}
	}
	link, err := a.api.GetPermalinkContext(ctx, &slack.PermalinkParameters{Channel: ch, Ts: ts})
	if err != nil {
		return "", fmt.Errorf("slack: chat.getPermalink: %w", err)
	}
	if _, ok := safeLink(link); !ok {
		return "", fmt.Errorf("slack: chat.getPermalink returned no usable link (%q)", clip(link, 80))
	}
	return link, nil
}

// OpenDM implements bot.Router: the direct message with a user, opened
// (or found) with conversations.open. The DM's channel id is remembered:
// it does not change.
func (a *Adapter) OpenDM(ctx context.Context, user string) (bot.Thread, error) {
	if !userIDPattern.MatchString(user) {
		return bot.Thread{}, fmt.Errorf("slack: open DM: %q is not a Slack user id", clip(user, 40))
	}
	if user == a.identity().UserID {
		return bot.Thread{}, fmt.Errorf("slack: open DM: %s is Airlock itself", user)
	}
	if ch := a.dms.get(user); ch != "" {
		return bot.Thread{Platform: Platform, Channel: ch}, nil
	}
	ch, _, _, err := a.api.OpenConversationContext(ctx, &slack.OpenConversationParameters{Users: []string{user}})
	if err != nil {
		return bot.Thread{}, fmt.Errorf("slack: conversations.open %s: %w", user, err)
	}
	if ch == nil || !channelIDPattern.MatchString(ch.ID) {
		return bot.Thread{}, fmt.Errorf("slack: conversations.open %s returned no channel", user)
	}
	a.dms.put(user, ch.ID)
	return bot.Thread{Platform: Platform, Channel: ch.ID}, nil
}

// PostPointer implements bot.Router: it posts the pointer in the thread
// and returns "<channel>/<ts>".
func (a *Adapter) PostPointer(ctx context.Context, th bot.Thread, p cardpkg.Pointer) (string, error) {
	return a.postBlocks(ctx, th, "pointer", RenderPointer(p), PointerText(p))
}

// UpdatePointer implements bot.Router: it replaces the posted pointer
// (chat.update), with the outcome once every call is decided.
func (a *Adapter) UpdatePointer(ctx context.Context, th bot.Thread, ref string, p cardpkg.Pointer) error {
	return a.syncUpdate(ctx, ref, "pointer", RenderPointer(p), PointerText(p))
}

// dmCache remembers users' DM channel ids.
type dmCache struct {
	mu sync.Mutex
	m  map[string]string
}

// maxDMs bounds the memory; past it, it starts over.
const maxDMs = 4096

func (d *dmCache) get(user string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.m[user]
}

func (d *dmCache) put(user, channel string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.m == nil || len(d.m) >= maxDMs {
		d.m = map[string]string{}
	}
	d.m[user] = channel
}

// maxPointerCalls bounds the calls a closed pointer lists.
const maxPointerCalls = 20

// RenderPointer returns the Block Kit blocks of a pointer: while a call
// waits, "Waiting for approval in #approvals" and a "View the card" link;
// once complete, "Approval request in #approvals closed" and each call's
// outcome as the card shows it (people by name, texts literal). No
// buttons. The channel is a channel element (it notifies nobody), a
// malformed one words.
func RenderPointer(p cardpkg.Pointer) []slack.Block {
	secs := []slack.RichTextElement{slack.NewRichTextSection(faceLine(p.Head(), fullCaps)...)}
	if p.Complete() {
		for i, c := range p.Calls {
			if i == maxPointerCalls {
				secs = append(secs, slack.NewRichTextSection(rtText(cardpkg.MoreCalls(len(p.Calls)-i), italic)))
				break
			}
			els := []slack.RichTextSectionElement{
				rtText(strconv.Itoa(c.Number)+". ", bold),
				rtText(revealClip(oneLine(c.Tool), maxToolChars), code),
				rtText("  ·  ", nil),
			}
			// Cut as a card's call is in a crowded message: twenty calls'
			// reasons and results stay within what a message holds.
			secs = append(secs, slack.NewRichTextSection(append(els, status(c, nil, cuts[2])...)...))
		}
	}
	return []slack.Block{slack.NewRichTextBlock("pointer", secs...)}
}

// PointerText is the pointer's plain text (notifications, clients
// without Block Kit; card.Pointer.Fallback): Airlock's words, the
// channel reference, a tool's name only when it is a plain name, and no
// user id.
func PointerText(p cardpkg.Pointer) string {
	where := cardpkg.SomeChannel
	if channelIDPattern.MatchString(p.Channel) {
		where = "<#" + p.Channel + ">"
	}
	return clip(p.Fallback(where), 3000)
}

// channelElement is a channel named on a message: a channel element for
// a Slack channel id, words otherwise.
func channelElement(id string) slack.RichTextSectionElement {
	if channelIDPattern.MatchString(id) {
		return slack.NewRichTextSectionChannelElement(id, nil)
	}
	return rtText(cardpkg.SomeChannel, nil)
}
