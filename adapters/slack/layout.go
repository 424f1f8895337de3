package slack

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/slack-go/slack"

	cardpkg "github.com/airlockhq/airlock/card"
)

// A card over several messages. Slack takes at most 50 blocks a message
// and refuses a message whose blocks hold more than about 12,000
// characters of text (msg_blocks_too_long), so a card of many calls is
// laid out over several messages, each holding its calls' buttons: every
// call can be decided from Slack.
//
// The split depends only on the number of calls (which never changes), so
// the card's messages stay the ones it was posted in as its calls are
// decided, edited and previewed: calls go in order into
// ceil(calls/CallsPerMessage) messages, as evenly as they fit, the later
// messages taking one more. The first message has the header and the
// agent's words, the last the card's own buttons (Allow all, Deny all,
// Extend), its deadline's story and the footer; with more than one, each
// says which part of the card it is (card.Card.PartNote).
//
// Within a message the calls share its text: a call takes what it needs
// while that fits, and the rest is shared evenly among those that need
// more, which are cut (arguments, preview, read-back, reasons, results)
// until they fit, the cut parts saying how much they hide and "Show full
// arguments" / "Show full preview" offering them whole. So a call's long
// or hostile arguments shorten that call, never push another call's
// buttons off the card, and no message exceeds Slack's limits.
const (
	// CallsPerMessage is the most calls a card message holds.
	CallsPerMessage = 8
	// MaxMessageText is the text (characters of the blocks' texts) a
	// card message is laid out within, below Slack's own limit (about
	// 12,000) for what Slack counts beside the texts.
	MaxMessageText = 10000
)

// CardMessage is one Slack message of a rendered card: its blocks and its
// plain text (notifications).
type CardMessage struct {
	Text   string        `json:"text"`
	Blocks []slack.Block `json:"blocks"`
}

// RenderMessages renders a card as the messages it is posted in (see
// above): one unless it has more than CallsPerMessage calls.
func RenderMessages(c cardpkg.Card, grantedBy map[string]string) []CardMessage {
	return RenderMessagesIn(c, grantedBy, MessagesFor(len(c.Calls)))
}

// MessagesFor is how many messages a card of n calls is posted in.
func MessagesFor(n int) int { return max(1, (n+CallsPerMessage-1)/CallsPerMessage) }

// RenderMessagesIn renders a card into n messages: the ones it was posted
// in. A card posted in fewer than it needs (by a release that posted one
// message) shows in each what fits, and says how many calls it could not
// show.
func RenderMessagesIn(c cardpkg.Card, grantedBy map[string]string, n int) []CardMessage {
	n = max(n, 1)
	groups := splitCalls(c.Calls, n)
	out := make([]CardMessage, n)
	first := 1
	for p, calls := range groups {
		var head, tail []slack.Block
		if p == 0 {
			head = append(head, header(c))
			if cp := copyNote(c); cp != nil {
				head = append(head, cp)
			}
			head = append(head, introSection(c))
			if said := introQuote(c); said != nil {
				head = append(head, said)
			}
		}
		if note := c.PartNote(p+1, n, first, first+len(calls)-1); note != "" && len(calls) > 0 {
			head = append(head, slack.NewContextBlock(partBlockID(p+1, n, c.BatchID), mrkdwn(escape(note))))
		}
		head = append(head, slack.NewDividerBlock())
		if p == n-1 {
			// After the calls: the deadline's story (extended,
			// escalations) and the card's own buttons, then the footer.
			sc := schedule(c)
			if sc != nil && textIn([]slack.Block{sc}) > maxScheduleText {
				sc = scheduleUpTo(c, 2, 2) // a config naming many people by name, not id
			}
			if sc != nil {
				tail = append(tail, sc)
			}
			if ex := extendActions(c); ex != nil {
				tail = append(tail, ex)
			}
			tail = append(tail, slack.NewContextBlock("footer", mrkdwn(clip(footer(c), maxFooterText))))
		}
		// Keep room for an overflow note.
		blocks := maxMessageBlock - len(head) - len(tail) - 1
		text := MaxMessageText - textIn(head) - textIn(tail) - maxOverflowNote
		body, shown := layoutCalls(c, calls, grantedBy, blocks, text)
		msg := append(head, body...)
		if rest := len(calls) - shown; rest > 0 {
			msg = append(msg, slack.NewContextBlock("overflow", mrkdwn(faceText(cardpkg.NotShown(rest, maxMessageBlock, MaxMessageText)))))
		}
		out[p] = CardMessage{Blocks: append(msg, tail...), Text: partText(c, p+1, n, calls)}
		first += len(calls)
	}
	return out
}

// Bounds of the card's own texts in a message: the overflow note, the
// deadline's story (escalations naming many people by name, not id, are
// listed shorter) and the footer.
const (
	maxOverflowNote = 250
	maxScheduleText = 1500
	maxFooterText   = 1200
)

// partBlockID names a message of a card over several: which part of how
// many, of which batch ("part_2_of_4_<batch>"). FindCard gathers a card's
// messages by it.
func partBlockID(part, parts int, batchID string) string {
	return fmt.Sprintf("part_%d_of_%d_%s", part, parts, clip(batchID, 200))
}

// parsePartBlockID reads a block id partBlockID made.
func parsePartBlockID(id string) (part, parts int, batchID string, ok bool) {
	rest, found := strings.CutPrefix(id, "part_")
	if !found {
		return 0, 0, "", false
	}
	a, rest, _ := strings.Cut(rest, "_of_")
	b, batchID, _ := strings.Cut(rest, "_")
	part, err1 := strconv.Atoi(a)
	parts, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil || part < 1 || part > parts || parts > MessagesFor(maxCallsOnACard) || batchID == "" {
		return 0, 0, "", false
	}
	return part, parts, batchID, true
}

// maxCallsOnACard bounds the parts a found card may have: more calls than
// any config lets a reply carry.
const maxCallsOnACard = 1000

// splitCalls cuts calls, in order, into n groups as even as they come,
// the later ones taking one more.
func splitCalls(calls []cardpkg.Call, n int) [][]cardpkg.Call {
	out := make([][]cardpkg.Call, n)
	base, extra := len(calls)/n, len(calls)%n
	at := 0
	for p := range n {
		size := base
		if p >= n-extra {
			size++
		}
		out[p] = calls[at : at+size]
		at += size
	}
	return out
}

// partText is a message's plain text (card.Card.PartFallback).
func partText(c cardpkg.Card, part, parts int, calls []cardpkg.Call) string {
	return clip(c.PartFallback(part, parts, calls), 3000)
}

// laidCall is a call's blocks on the card at one cut and their text.
type laidCall struct {
	blocks []slack.Block
	text   int
}

// layCall renders a call at cut k: its block, its buttons (when it has
// any) and what a yes covers (withCovers).
func layCall(c cardpkg.Card, call cardpkg.Call, grantedBy map[string]string, withCovers bool, k caps) laidCall {
	args := argsPreviewWith(call.Args, k)
	acts := previewActions(callActions(c, call, args.cut), call, k)
	blocks := []slack.Block{callBlock(call, args, cardpkg.Offers(acts, cardpkg.ActShowArgs), grantedBy, k)}
	if len(acts) > 0 {
		blocks = append(blocks, actionsBlock("actions_"+strconv.Itoa(call.Number), acts))
	}
	if cover := coversBlock(c, call, withCovers && len(acts) > 0, k); cover != nil {
		blocks = append(blocks, cover)
	}
	return laidCall{blocks: blocks, text: textIn(blocks)}
}

// layoutCalls lays out a message's calls within blocks and text: each
// call as it is when it fits, else cut (see cuts) to its share. It
// returns the blocks and how many calls they show (all, unless even cut
// to the bone they do not fit: a message holding more calls than it was
// made for).
func layoutCalls(c cardpkg.Card, calls []cardpkg.Call, grantedBy map[string]string, blocks, text int) ([]slack.Block, int) {
	withCovers := coversFit(c, calls, blocks)
	laid := make([]laidCall, len(calls))
	for i, call := range calls {
		laid[i] = layCall(c, call, grantedBy, withCovers, cuts[0])
	}
	// Each call's share: what it needs while that fits, the rest evenly.
	share := make([]int, len(calls))
	order := make([]int, len(calls))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return laid[a].text - laid[b].text })
	left := text
	for j, i := range order {
		share[i] = min(laid[i].text, max(left, 0)/(len(order)-j))
		left -= share[i]
	}
	var out []slack.Block
	usedBlocks, usedText := 0, 0
	for i, call := range calls {
		l := laid[i]
		for _, k := range cuts[1:] {
			if l.text <= share[i] {
				break
			}
			l = layCall(c, call, grantedBy, withCovers, k)
		}
		if usedBlocks+len(l.blocks) > blocks || usedText+l.text > text {
			return out, i
		}
		usedBlocks += len(l.blocks)
		usedText += l.text
		out = append(out, l.blocks...)
	}
	return out, len(calls)
}

// caps are how much of each text from outside Airlock a call shows on
// the card.
type caps struct {
	tool, reason, result   int // characters of the tool's name, a reason or quoted text, a result
	summary, summaryLines  int // the read-back; 0 leaves it out
	args, argsLines        int // the arguments; 0 leaves them out (the note says how much is hidden)
	preview, previewLines  int // the preview's output; 0 leaves it out (likewise)
	changes                int // changed keys listed on an edited call
	changeKey, changeValue int
	cover                  int // the line of what a yes covers
	people                 int // people named per set of who may decide
	person                 int // characters of a person named by name, not id
}

// fullCaps is a call shown whole (as far as a card shows anything whole).
var fullCaps = caps{
	tool: maxToolChars, reason: maxReasonChars, result: maxResultChars,
	summary: maxSummaryChars, summaryLines: 6,
	args: ArgsPreviewChars, argsLines: ArgsPreviewLines,
	preview: PreviewChars, previewLines: PreviewLines,
	changes: maxChangesShown, changeKey: maxChangeKey, changeValue: maxChangeValue,
	cover: maxCoverChars, people: maxPeoplePerSet, person: maxLiteralPersonL,
}

// cuts are a call's cuts, from whole to the bone: at the last only its
// number, tool, why, where it stands and its buttons are left, with
// notes saying how much of its arguments and preview are hidden.
var cuts = []caps{
	fullCaps,
	{tool: 80, reason: 260, result: 200, summary: 200, summaryLines: 4, args: 500, argsLines: 10, preview: 700, previewLines: 12,
		changes: 5, changeKey: 40, changeValue: 100, cover: 600, people: 10, person: 60},
	{tool: 60, reason: 120, result: 100, summary: 100, summaryLines: 2, args: 200, argsLines: 5, preview: 250, previewLines: 5,
		changes: 2, changeKey: 30, changeValue: 40, cover: 300, people: 5, person: 40},
	{tool: 40, reason: 60, result: 60, summary: 50, summaryLines: 1, args: 60, argsLines: 2, preview: 60, previewLines: 2,
		changes: 1, changeKey: 20, changeValue: 20, cover: 200, people: 3, person: 30},
	{tool: 40, reason: 40, result: 40, cover: 150, people: 2, person: 20},
}

// textIn counts the characters of the texts in blocks, as Slack
// counts them against a message's limit: every "text" of their JSON.
func textIn(blocks []slack.Block) int {
	b, err := json.Marshal(blocks)
	if err != nil {
		return 0
	}
	var v any
	if json.Unmarshal(b, &v) != nil {
		return 0
	}
	return textOf(v)
}

func textOf(v any) int {
	n := 0
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if s, ok := e.(string); ok && k == "text" {
				n += utf8.RuneCountInString(s)
				continue
			}
			n += textOf(e)
		}
	case []any:
		for _, e := range v {
			n += textOf(e)
		}
	}
	return n
}
