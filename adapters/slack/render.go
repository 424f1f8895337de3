package slack

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/slack-go/slack"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/confirm"
)

// Action ids of the card's buttons and of the deny-reason modal. Every
// button carries the call's opaque reference (bot.Ref) as its value, never
// the tool name or the arguments.
const (
	ActionAllow      = "airlock_allow"       // style primary; the only primary button
	ActionDeny       = "airlock_deny"        // style danger; the only danger button
	ActionDenyReason = "airlock_deny_reason" // no style: opens the deny-reason modal
	ActionShowArgs   = "airlock_show_args"   // no style: opens a modal with the whole arguments

	// CallbackDenyReason is the callback_id of the deny-reason modal.
	CallbackDenyReason = "airlock_deny_reason"
	// CallbackShowArgs is the callback_id of the read-only arguments modal.
	CallbackShowArgs = "airlock_show_args"

	reasonBlockID  = "airlock_reason"
	reasonActionID = "airlock_reason_input"
)

// Rendering limits. Slack allows 3000 characters in a section's text, 50
// blocks in a message and 100 in a modal.
const (
	maxSectionText  = 3000
	maxMessageBlock = 50
	maxModalBlocks  = 100

	// ArgsPreviewChars and ArgsPreviewLines bound the arguments shown on
	// the card; longer arguments are cut with a note, and while the card
	// waits a "Show full arguments" button opens them whole in a modal.
	ArgsPreviewChars = 1000
	ArgsPreviewLines = 20

	maxIntroChars   = 1200
	maxSummaryChars = 400
	maxResultChars  = 300
	maxReasonChars  = 520
	maxToolChars    = 80
	maxModalArgs    = 2800 // characters of arguments per modal section
)

var (
	userIDPattern  = regexp.MustCompile(`^[UW][A-Z0-9]{2,40}$`)
	groupIDPattern = regexp.MustCompile(`^S[A-Z0-9]{2,40}$`)
)

// Render returns the Block Kit blocks of a card: a header, what the agent
// wants to do, one section per call (tool, read-back, arguments, where it
// stands) followed, for each call still waiting, by an actions block with
// Allow (primary), Deny (danger) and "Deny with reason…" (no style), and a
// footer saying who may approve and when the request expires. A complete
// card has no buttons at all.
func Render(card bot.Card) []slack.Block {
	complete := card.Complete()
	blocks := []slack.Block{header(complete), introSection(card)}
	blocks = append(blocks, slack.NewDividerBlock())

	// Keep room for the footer and an overflow note.
	budget := maxMessageBlock - len(blocks) - 2
	shown := 0
	for _, c := range card.Calls {
		need := 1
		if c.Open() {
			need = 2
		}
		if need > budget {
			break
		}
		budget -= need
		shown++
		blocks = append(blocks, callSection(c, card.RequestedBy, complete))
		if c.Open() {
			blocks = append(blocks, callActions(c))
		}
	}
	if rest := len(card.Calls) - shown; rest > 0 {
		note := fmt.Sprintf(":warning: %d more %s not shown: a Slack message holds at most %d blocks. Calls not shown cannot be decided here; unless decided they expire and do not run.",
			rest, plural(rest, "call", "calls"), maxMessageBlock)
		blocks = append(blocks, slack.NewContextBlock("overflow", mrkdwn(note)))
	}
	blocks = append(blocks, slack.NewContextBlock("footer", mrkdwn(footer(card, complete))))
	return blocks
}

// FallbackText is the message's plain text: notifications and clients
// without Block Kit show it.
func FallbackText(card bot.Card) string {
	var b strings.Builder
	if card.Complete() {
		b.WriteString("Approval request closed")
	} else {
		b.WriteString("Approval needed")
	}
	fmt.Fprintf(&b, " (%d %s)", len(card.Calls), plural(len(card.Calls), "call", "calls"))
	for _, c := range card.Calls {
		fmt.Fprintf(&b, "\n%d. %s: %s — %s", c.Number, clip(c.Tool, maxToolChars), clip(oneLine(c.Summary), 200), clip(c.Outcome(), 200))
	}
	return escapeClip(b.String(), 3000)
}

func header(complete bool) slack.Block {
	text := "Approval needed"
	if complete {
		text = "Approval request closed"
	}
	return slack.NewHeaderBlock(slack.NewTextBlockObject(slack.PlainTextType, text, true, false), slack.HeaderBlockOptionBlockID("header"))
}

func introSection(card bot.Card) slack.Block {
	n := len(card.Calls)
	var b strings.Builder
	who := "The agent"
	if card.RequestedBy != "" {
		who = "Asked by " + user(card.RequestedBy) + "; the agent"
	}
	if card.Complete() {
		fmt.Fprintf(&b, "%s wanted to run %d %s. Every call is decided; the outcomes are below.", who, n, plural(n, "call", "calls"))
	} else {
		fmt.Fprintf(&b, "%s wants to run %d %s. *Nothing runs until each call that needs approval is allowed or denied.*", who, n, plural(n, "call", "calls"))
	}
	if intro := strings.TrimSpace(card.Intro); intro != "" {
		b.WriteString("\n")
		b.WriteString(quote(escapeClip(limitLines(intro, 15), maxIntroChars)))
	}
	return slack.NewSectionBlock(mrkdwn(clipSection(b.String())), nil, nil, slack.SectionBlockOptionBlockID("intro"))
}

// callSection is one call: number, tool, whether it needs approval, the
// read-back, the arguments in a code block, and where it stands.
func callSection(c bot.CardCall, requester string, complete bool) slack.Block {
	var b strings.Builder
	gate := "needs approval"
	if !c.Flagged {
		gate = "no approval needed"
	}
	fmt.Fprintf(&b, "*%d. `%s`*  ·  _%s_\n", c.Number, codeSafe(escapeClip(c.Tool, maxToolChars)), gate)
	if s := strings.TrimSpace(c.Summary); s != "" {
		b.WriteString(quote(escapeClip(limitLines(s, 6), maxSummaryChars)))
		b.WriteString("\n")
	}
	preview, shownChars, truncated := argsPreview(c.Args)
	b.WriteString("```\n")
	b.WriteString(codeSafe(preview))
	b.WriteString("\n```\n")
	var accessory *slack.Accessory
	if truncated {
		total := utf8.RuneCountInString(strings.TrimSpace(c.Args))
		if complete {
			fmt.Fprintf(&b, "_Arguments cut: %s of %s characters shown._\n", thousands(shownChars), thousands(total))
		} else {
			fmt.Fprintf(&b, "_Arguments cut: %s of %s characters shown. *Show full arguments* opens them whole._\n", thousands(shownChars), thousands(total))
			btn := slack.NewButtonBlockElement(ActionShowArgs, c.Ref, plain("Show full arguments"))
			btn.AccessibilityLabel = clip(fmt.Sprintf("Show the full arguments of call %d", c.Number), 75)
			accessory = slack.NewAccessory(btn)
		}
	}
	b.WriteString(status(c, requester))
	return slack.NewSectionBlock(mrkdwn(clipSection(b.String())), nil, accessory, slack.SectionBlockOptionBlockID("call_"+strconv.Itoa(c.Number)))
}

// callActions holds the decision buttons of a call still waiting. Allow is
// the only primary button and Deny the only danger button of the card.
func callActions(c bot.CardCall) slack.Block {
	tool := clip(c.Tool, 40)
	allow := slack.NewButtonBlockElement(ActionAllow, c.Ref, plain("Allow"))
	allow.Style = slack.StylePrimary
	allow.AccessibilityLabel = clip(fmt.Sprintf("Allow call %d, %s", c.Number, tool), 75)
	deny := slack.NewButtonBlockElement(ActionDeny, c.Ref, plain("Deny"))
	deny.Style = slack.StyleDanger
	deny.AccessibilityLabel = clip(fmt.Sprintf("Deny call %d, %s", c.Number, tool), 75)
	reason := slack.NewButtonBlockElement(ActionDenyReason, c.Ref, plain("Deny with reason…"))
	reason.AccessibilityLabel = clip(fmt.Sprintf("Deny call %d with a reason", c.Number), 75)
	return slack.NewActionBlock("actions_"+strconv.Itoa(c.Number), allow, deny, reason)
}

// status says where a call stands, with who decided and when. A deny by
// the requester themself reads as a withdrawal.
func status(c bot.CardCall, requester string) string {
	by, at := decider(c.DecidedBy), when(c.DecidedAt)
	switch c.Decision {
	case confirm.DecisionPending:
		return ":hourglass_flowing_sand: Waiting for an approver"
	case confirm.DecisionDenied:
		if c.DecidedBy == bot.SystemActor {
			return ":no_entry_sign: Not run: " + escapeClip(c.DenyMessage, maxReasonChars)
		}
		verb := "Denied by "
		if c.DecidedBy != "" && c.DecidedBy == requester {
			verb = "Withdrawn by "
		}
		out := ":no_entry_sign: " + verb + by + at + "; not run"
		if r := denyReason(c.DenyMessage); r != "" {
			out += "\n" + quote("Reason: "+escapeClip(r, maxReasonChars))
		}
		return out
	case confirm.DecisionExpired:
		return ":alarm_clock: Expired: nobody decided in time; not run"
	case confirm.DecisionInvalid:
		return ":warning: " + escapeClip(c.DenyMessage, maxReasonChars)
	}
	who := ":white_check_mark: Allowed by " + by + at
	if c.Decision == confirm.DecisionAllowedByPolicy {
		who = ":arrow_forward: Runs with the batch (no approval needed)"
	}
	switch c.Run {
	case confirm.RunRunning:
		return who + "  ·  :gear: running"
	case confirm.RunSucceeded:
		return who + "  ·  :heavy_check_mark: succeeded"
	case confirm.RunFailed:
		return who + "  ·  :x: failed: " + escapeClip(oneLine(c.Result), maxResultChars)
	case confirm.RunUnknown:
		return who + "  ·  :warning: *outcome unknown*: Airlock stopped while it ran. A person must check it; it will not be retried."
	}
	return who
}

func footer(card bot.Card, complete bool) string {
	var parts []string
	if card.RequestedBy != "" {
		parts = append(parts, "Requested by "+user(card.RequestedBy))
	}
	parts = append(parts, "May approve: "+approvers(card.Approvers))
	if !complete {
		parts = append(parts, "The requester may withdraw (deny) their own calls")
		if !card.ExpiresAt.IsZero() {
			parts = append(parts, "Expires "+slackDate(card.ExpiresAt, "{date_short_pretty} at {time}"))
		}
	} else {
		parts = append(parts, "Closed")
	}
	if card.BatchID != "" {
		parts = append(parts, "Request "+escapeClip(card.BatchID, 40))
	}
	return clip(strings.Join(parts, "  ·  "), maxSectionText)
}

func approvers(s bot.ApproverSet) string {
	var names []string
	for _, u := range s.Users {
		names = append(names, user(u))
	}
	for _, g := range s.Groups {
		if groupIDPattern.MatchString(g) {
			names = append(names, "<!subteam^"+g+">")
		} else {
			names = append(names, escapeClip(g, 40))
		}
	}
	if len(names) == 0 {
		return "nobody is configured for this channel (`channels[]` in the config)"
	}
	const maxNames = 20
	if len(names) > maxNames {
		rest := len(names) - maxNames
		names = append(names[:maxNames], fmt.Sprintf("and %d more", rest))
	}
	return strings.Join(names, ", ")
}

// denyReason extracts the approver's own words from a deny message built
// by the bot: `<default> Reason given by the approver (U…): "…"`.
func denyReason(msg string) string {
	rest, ok := strings.CutPrefix(strings.TrimSpace(msg), confirm.DefaultDenyMessage)
	if !ok {
		return strings.TrimSpace(msg)
	}
	rest = strings.TrimSpace(rest)
	const lead = "Reason given by the approver ("
	if strings.HasPrefix(rest, lead) {
		if _, q, ok := strings.Cut(rest, "): "); ok {
			if s, err := strconv.Unquote(q); err == nil {
				return s
			}
		}
	}
	return rest
}

// decider renders who decided: a mention for a Slack user id, words for
// the bot's own actors.
func decider(id string) string {
	switch id {
	case "":
		return "someone"
	case bot.PolicyActor:
		return "the policy"
	case bot.SystemActor:
		return "Airlock"
	}
	return user(id)
}

func user(id string) string {
	if userIDPattern.MatchString(id) {
		return "<@" + id + ">"
	}
	return escapeClip(id, 60)
}

func when(t *time.Time) string {
	if t == nil || t.IsZero() {
		return ""
	}
	return " " + slackDate(*t, "{date_short_pretty} at {time_secs}")
}

// slackDate is Slack's date token: each reader sees it in their own time
// zone; the fallback is UTC.
func slackDate(t time.Time, format string) string {
	return fmt.Sprintf("<!date^%d^%s|%s>", t.Unix(), format, t.UTC().Format("2006-01-02 15:04:05 UTC"))
}

// argsPreview returns the arguments cut to the preview size and escaped,
// how many of their characters it shows, and whether they were cut.
func argsPreview(args string) (preview string, shown int, cut bool) {
	args = strings.TrimSpace(args)
	if args == "" {
		return "(no arguments)", 0, false
	}
	lines := strings.Split(args, "\n")
	if len(lines) > ArgsPreviewLines {
		lines = lines[:ArgsPreviewLines]
		cut = true
	}
	s := strings.Join(lines, "\n")
	// Bound the escaped text: "&" takes five characters once escaped.
	var b strings.Builder
	n := 0
	for _, r := range s {
		p := escape(string(r))
		if n+utf8.RuneCountInString(p) > ArgsPreviewChars {
			cut = true
			break
		}
		b.WriteString(p)
		n += utf8.RuneCountInString(p)
		shown++
	}
	preview = b.String()
	if cut {
		preview += "\n…"
	}
	return preview, shown, cut
}

// DenyReasonModal is the modal "Deny with reason…" opens. Its private
// metadata carries the call's reference and where the card is, so the
// submission can be decided and answered in the right channel.
func DenyReasonModal(meta ModalMeta, call *bot.CardCall) slack.ModalViewRequest {
	var about string
	if call != nil {
		about = fmt.Sprintf("You are denying call %d, `%s`", call.Number, codeSafe(escapeClip(call.Tool, maxToolChars)))
		if s := strings.TrimSpace(call.Summary); s != "" {
			about += ":\n" + quote(escapeClip(s, maxSummaryChars))
		}
		about += "\n"
	}
	about += "The call will not run. Your reason is passed to the agent."
	input := slack.NewPlainTextInputBlockElement(plain("Why is this denied?"), reasonActionID)
	input.Multiline = true
	input.MaxLength = bot.MaxReasonLen
	input.FocusOnLoad = true
	return slack.ModalViewRequest{
		Type:            slack.VTModal,
		CallbackID:      CallbackDenyReason,
		Title:           plain("Deny with reason"),
		Submit:          plain("Deny"),
		Close:           plain("Cancel"),
		PrivateMetadata: meta.encode(),
		Blocks: slack.Blocks{BlockSet: []slack.Block{
			slack.NewSectionBlock(mrkdwn(clipSection(about)), nil, nil, slack.SectionBlockOptionBlockID("about")),
			slack.NewInputBlock(reasonBlockID, plain("Reason"), nil, input),
		}},
	}
}

// ArgsModal shows a call's whole arguments, read-only.
func ArgsModal(call bot.CardCall) slack.ModalViewRequest {
	head := fmt.Sprintf("*%d. `%s`*", call.Number, codeSafe(escapeClip(call.Tool, maxToolChars)))
	if s := strings.TrimSpace(call.Summary); s != "" {
		head += "\n" + quote(escapeClip(s, maxSummaryChars))
	}
	blocks := []slack.Block{slack.NewSectionBlock(mrkdwn(clipSection(head)), nil, nil, slack.SectionBlockOptionBlockID("head"))}
	chunks := chunkEscaped(call.Args, maxModalArgs)
	limit := maxModalBlocks - 2
	for i, ch := range chunks {
		if i == limit {
			blocks = append(blocks, slack.NewContextBlock("cut", mrkdwn(fmt.Sprintf("_The arguments are longer than a Slack modal holds; %d of %d parts shown. The audit log has them whole._", limit, len(chunks)))))
			break
		}
		blocks = append(blocks, slack.NewSectionBlock(mrkdwn("```\n"+codeSafe(ch)+"\n```"), nil, nil, slack.SectionBlockOptionBlockID("args_"+strconv.Itoa(i+1))))
	}
	return slack.ModalViewRequest{
		Type:       slack.VTModal,
		CallbackID: CallbackShowArgs,
		Title:      plain(clip(fmt.Sprintf("Call %d arguments", call.Number), 24)),
		Close:      plain("Close"),
		Blocks:     slack.Blocks{BlockSet: blocks},
	}
}

// chunkEscaped escapes s and splits it into pieces of at most n
// characters, cutting after a line break where one is near, never inside
// an escape entity.
func chunkEscaped(s string, n int) []string {
	if strings.TrimSpace(s) == "" {
		return []string{"(no arguments)"}
	}
	var out []string
	var cur []string // escaped characters
	curLen := 0
	for _, r := range s {
		p := escape(string(r))
		pl := utf8.RuneCountInString(p)
		if curLen+pl > n && len(cur) > 0 {
			cut := len(cur)
			for i := len(cur) - 1; i > len(cur)/2; i-- {
				if cur[i-1] == "\n" {
					cut = i
					break
				}
			}
			out = append(out, strings.Join(cur[:cut], ""))
			cur = append([]string(nil), cur[cut:]...)
			curLen = 0
			for _, c := range cur {
				curLen += utf8.RuneCountInString(c)
			}
		}
		cur = append(cur, p)
		curLen += pl
	}
	if len(cur) > 0 {
		out = append(out, strings.Join(cur, ""))
	}
	for i := range out {
		if out[i] = strings.TrimRight(out[i], "\n"); out[i] == "" {
			out[i] = " "
		}
	}
	return out
}

// --- text helpers ---

var escaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// escape makes text inert for Slack's mrkdwn: no mentions, links or
// @channel from model or tool text.
func escape(s string) string { return escaper.Replace(s) }

// escapeClip escapes s and keeps at most n characters of the result,
// cutting between source characters (never inside an entity) and ending a
// cut text with "…".
func escapeClip(s string, n int) string {
	esc := escape(s)
	if utf8.RuneCountInString(esc) <= n {
		return esc
	}
	var b strings.Builder
	count := 0
	for _, r := range s {
		p := escape(string(r))
		pl := utf8.RuneCountInString(p)
		if count+pl > n-1 {
			break
		}
		b.WriteString(p)
		count += pl
	}
	b.WriteString("…")
	return b.String()
}

// clip keeps at most n characters of s, ending a cut text with "…".
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	if n <= 1 {
		return string(r[:max(n, 0)])
	}
	return string(r[:n-1]) + "…"
}

// clipSection keeps a section's text within Slack's limit.
func clipSection(s string) string { return clip(s, maxSectionText) }

// codeSafe keeps text from closing the code span or block it sits in.
func codeSafe(s string) string {
	s = strings.ReplaceAll(s, "```", "`\u200b`\u200b`")
	return s
}

// quote prefixes every line with Slack's quote marker (a literal ">" at
// the start of a line; the text itself is already escaped).
func quote(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = "> " + l
	}
	return strings.Join(lines, "\n")
}

// limitLines keeps at most n lines of s, joining the rest into the last.
func limitLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n)
	if len(lines) == n {
		lines[n-1] = oneLine(lines[n-1])
	}
	return strings.Join(lines, "\n")
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func mrkdwn(s string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.MarkdownType, s, false, false)
}

func plain(s string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.PlainTextType, s, true, false)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
