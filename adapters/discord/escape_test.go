package discord

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/airlockhq/airlock/adapters/internal/visible"
	"github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
)

// shown is what a reader sees of escaped markdown: Discord shows a
// backslash before ASCII punctuation as the mark alone.
func shown(v any) string {
	s, _ := v.(string)
	var b strings.Builder
	escaped := false
	for _, r := range s {
		switch {
		case escaped:
			if r >= 128 || !isASCIIPunct(byte(r)) {
				b.WriteByte('\\')
			}
			b.WriteRune(r)
			escaped = false
		case r == '\\':
			escaped = true
		default:
			b.WriteRune(r)
		}
	}
	if escaped {
		b.WriteByte('\\')
	}
	return b.String()
}

// unescapedText is escaped markdown with every escaped mark blanked out:
// what is left is what Discord would act on (markup, mentions, links).
func unescapedText(s string) string {
	var b strings.Builder
	escaped := false
	for _, r := range s {
		switch {
		case escaped:
			b.WriteByte(' ')
			escaped = false
		case r == '\\':
			escaped = true
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// field is the value of an embed's field by name.
func field(embed map[string]any, name string) string {
	fields, _ := embed["fields"].([]any)
	for _, f := range fields {
		if m, _ := f.(map[string]any); m["name"] == name {
			s, _ := m["value"].(string)
			return s
		}
	}
	return ""
}

var fenceRE = regexp.MustCompile("(?s)```(?:json|text)\n(.*?)\n```")

// outsideCode splits a text into what is outside its ```json blocks and
// the blocks' contents.
func outsideCode(s string) (outside string, blocks []string) {
	for _, m := range fenceRE.FindAllStringSubmatch(s, -1) {
		blocks = append(blocks, m[1])
	}
	return fenceRE.ReplaceAllString(s, " "), blocks
}

// Airlock's own live markup on a card: the mentions of the test's people
// and Discord timestamps.
var ownMarkup = regexp.MustCompile(`<@(` + requester + `|` + moderator + `|` + dmUser + `|` + approver2 + `)>|<@&` + modRole + `>|<t:\d+:[fRt]>|\*\*(Approval needed|Approval request closed|Nothing runs until (each call that needs approval|it) is allowed or denied\.|Show full arguments|outcome unknown|Outcome unknown|Revoked by|Expired\.|Edited by)\*\*|` + "`channels\\[\\]`" +
	`|<#` + approvalsCh + `>|\[(View the conversation|View the card)\]\(<https://discord\.com/channels/(` + guildID + `|@me)(/\d+){1,2}>\)`)

var shortcodeRE = regexp.MustCompile(`:[A-Za-z0-9_+-]+:`)

// liveMarkup lists what in a rendered text Discord would act on beyond
// Airlock's own markup: mentions, @everyone/@here, spoilers, links,
// emoji shortcodes, quotes or headings not Airlock's, fences broken
// open, hidden characters.
func liveMarkup(s string) []string {
	var bad []string
	for _, r := range s {
		if visible.Hidden(r) {
			bad = append(bad, fmt.Sprintf("hidden %U", r))
		}
	}
	outside, blocks := outsideCode(s)
	for _, b := range blocks {
		if strings.Contains(b, "`") {
			bad = append(bad, "a backtick inside a code block")
		}
	}
	u := ownMarkup.ReplaceAllString(unescapedText(outside), " ")
	for _, live := range []string{"<", "@everyone", "@here", "||", "](", "http://", "https://", "```", "~~", "__", "*"} {
		if strings.Contains(u, live) {
			bad = append(bad, live)
		}
	}
	if shortcodeRE.MatchString(u) {
		bad = append(bad, "emoji shortcode")
	}
	for _, line := range strings.Split(u, "\n") {
		if strings.HasPrefix(line, "#") || strings.HasPrefix(line, "-") || (strings.HasPrefix(line, ">") && !strings.HasPrefix(line, "> ")) {
			bad = append(bad, "line markup "+line)
		}
	}
	return bad
}

func TestEscapeMarkdown(t *testing.T) {
	hostile := "<@123456789012345678> <@&5> @everyone @here ||x|| [x](http://evil) :skull: **b** __u__ ~~s~~ `c` > q # h -# s\n- l 1. n \\ <t:1:R> <#1> https://evil.example \u202eevil\u200b"
	esc := escapeMarkdown(hostile)
	if bad := liveMarkup(esc); len(bad) != 0 {
		t.Fatalf("escaped text still live: %v\n%s", bad, esc)
	}
	want := strings.NewReplacer("\u202e", `\u202e`, "\u200b", `\u200b`).Replace(hostile)
	if got := shown(esc); got != want {
		t.Fatalf("escaped text reads\n%q\nwant\n%q", got, want)
	}
	if got := escapeClip("a*b*c", 4); got != `a\*…` || runes(escapeClip(strings.Repeat("*", 50), 11)) > 11 {
		t.Fatalf("escapeClip: %q", got)
	}
	if got := codeText("a```b\u202e"); got != `a\u0060\u0060\u0060b\u202e` {
		t.Fatalf("codeText: %q", got)
	}
	var v map[string]string
	if err := json.Unmarshal([]byte(codeText("{\"k\":\"```x\u202e\"}")), &v); err != nil || v["k"] != "```x\u202e" {
		t.Fatalf("code text of JSON changed its meaning: %v %q", err, v["k"])
	}
}

// hostileCard is a card whose every model, tool and person text is an
// attack: bidi override, zero-width space, broadcast and user mentions,
// a masked link, a spoiler, an emoji shortcode, a backtick run, and
// arguments far longer than a card holds; rule names, voters, approver
// sets, deny words and a rule's message too.
func hostileCard() card.Card {
	at := time.Date(2026, 11, 29, 16, 6, 0, 0, time.UTC)
	evil := "Restart api\u202egnp.exe\u200b <!channel> @everyone <@123456789012345678> [x](http://evil) ||x|| :skull: ```"
	args := "{\n  \"note\": \"" + evil + " " + strings.Repeat("A", 3000) + "\",\n  \"service\": \"api\u202e\"\n}"
	c := sampleCard()
	c.GrantFor = time.Hour
	c.Intro = "Trust me @here ||x|| [click](http://evil) <@&" + modRole + ">\n# Approved already\n> quoted \u2066isolate\u2069"
	c.Calls = []card.Call{
		{Ref: "abcdefghijklmnopqrstuvwxyz.0", Number: 1, Key: "c1", Tool: "restart_service", Summary: evil, Args: args, Flagged: true,
			Approvals: 2, Votes: []confirm.Vote{{By: "<@&" + modRole + "> @everyone ||v||", At: at}},
			Reasons:  []confirm.Reason{{Kind: confirm.ReasonRule, Rule: "prod ||x|| <@1> [x](http://evil)"}, {Kind: confirm.ReasonUnknownOutcome}},
			Restrict: []confirm.Approvers{{Users: []string{"@everyone", moderator}, Roles: []string{modRole, "<@&1>"}, Groups: []string{"||g||"}}},
			State:    card.State{Kind: card.Waiting}},
		{Ref: "abcdefghijklmnopqrstuvwxyz.1", Number: 2, Key: "c2", Tool: "evil`tool@everyone", Summary: "", Args: "{}", Flagged: true, Approvals: 1,
			Reasons: []confirm.Reason{{Kind: confirm.ReasonToolFlag}},
			State:   card.State{Kind: card.Denied, By: moderator, At: &at, Reason: "@everyone <@1> ||no|| :skull:"}},
		{Ref: "abcdefghijklmnopqrstuvwxyz.2", Number: 3, Key: "c3", Tool: "service_status", Summary: "status", Args: "{}", Approvals: 1,
			State: card.State{Kind: card.AllowedByPolicy, At: &at}, Run: confirm.RunFailed, Result: "HTTP 500: <@&" + otherRole + "> [x](http://evil) \x1b[2J"},
		{Ref: "abcdefghijklmnopqrstuvwxyz.3", Number: 4, Key: "c4", Tool: "restart_service", Summary: "x", Args: "{}", Approvals: 1,
			Reasons: []confirm.Reason{{Kind: confirm.ReasonRule, Rule: "r <@1>"}},
			State:   card.State{Kind: card.DeniedByRule, At: &at, Rule: "r <@1> ||x||", Message: "@here [x](http://evil) \u202e **b**"}},
		{Ref: "abcdefghijklmnopqrstuvwxyz.4", Number: 5, Key: "c5", Tool: "restart_service", Summary: "y", Args: "{}", Flagged: true, Approvals: 1,
			State: card.State{Kind: card.Withdrawn, By: "<@1>", At: &at, Reason: "`x` <#1> <t:1:R>"}},
	}
	return c
}

func TestHostileCardIsInert(t *testing.T) {
	cd := hostileCard()
	golden(t, "card_hostile.json", render(cd))
	for _, m := range RenderMessages(cd) {
		texts := []string{m.Content}
		for _, e := range m.Embeds {
			texts = append(texts, e.Title, e.Description)
			for _, f := range e.Fields {
				texts = append(texts, f.Name, f.Value)
			}
		}
		for _, s := range texts {
			if bad := liveMarkup(s); len(bad) != 0 {
				t.Errorf("live in %q: %v", s, bad)
			}
		}
	}
	_, embeds, components := Render(cd)
	if !strings.Contains(embeds[0].Description, `\u202egnp`) || !strings.Contains(field(embedMap(t, embeds[0]), "Arguments"), `\u0060\u0060\u0060`) {
		t.Errorf("the bidi override or the backticks are not shown escaped: %q", embeds[0].Description)
	}
	args := field(embedMap(t, embeds[0]), "Arguments")
	if !strings.Contains(args, "more characters hidden") || !strings.Contains(args, "Show full arguments") {
		t.Errorf("cut arguments do not say so: %q", args)
	}
	if why := field(embedMap(t, embeds[0]), flagReasonLabel); !strings.HasPrefix(shown(why), cd.Calls[0].Why()+"\nWho may decide: ") {
		t.Errorf("why %q", why)
	}
	if st := field(embedMap(t, embeds[0]), statusLabel); !strings.Contains(shown(st), "1 of 2 approvals: <@&"+modRole+"> @everyone ||v||") {
		t.Errorf("progress %q", st)
	}
	if st := field(embedMap(t, embeds[3]), statusLabel); !strings.Contains(shown(st), "refused by rule r <@1> ||x||; not run") || !strings.Contains(shown(st), "@here [x](http://evil)") {
		t.Errorf("rule refusal %q", shown(st))
	}
	_, _, _, show := buttonIDsAll(t, componentMaps(t, components))
	if len(show) != 1 || show[0] != "al:s:"+cd.Calls[0].Ref {
		t.Errorf("show-arguments buttons %v", show)
	}
	if g := grantIDs(t, componentMaps(t, components)); len(g) != 0 {
		t.Errorf("a call needing two approvals offers a grant: %v", g)
	}
}

func embedMap(t *testing.T, e *discordgo.MessageEmbed) map[string]any {
	t.Helper()
	var m map[string]any
	b, _ := json.Marshal(e)
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func componentMaps(t *testing.T, c []discordgo.MessageComponent) []map[string]any {
	t.Helper()
	var out []map[string]any
	b, _ := json.Marshal(c)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestArgsReply(t *testing.T) {
	call := hostileCard().Calls[0]
	r := ArgsReply(call)
	if r.Flags != discordgo.MessageFlagsEphemeral || r.AllowedMentions == nil || len(r.AllowedMentions.Parse) != 0 {
		t.Fatalf("reply not ephemeral or may ping: %+v", r)
	}
	if len(r.Files) != 1 || r.Files[0].Name != ArgsFileName || runes(r.Content) > maxContent {
		t.Fatalf("long arguments: content %q, %d files", r.Content, len(r.Files))
	}
	body, err := io.ReadAll(r.Files[0].Reader)
	if err != nil {
		t.Fatal(err)
	}
	// The file is the exact arguments: hidden characters written as JSON
	// escapes, which mean the same characters.
	var got, want any
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("attached arguments are not JSON: %v", err)
	}
	json.Unmarshal([]byte(call.Args), &want)
	if !reflect.DeepEqual(got, want) || visible.Contains(string(body)) {
		t.Fatalf("attached arguments differ from the call's or hide characters")
	}
	small := call
	small.Args = "{\n  \"service\": \"api ```\u202e <@1>\"\n}"
	r = ArgsReply(small)
	if len(r.Files) != 0 || !strings.Contains(r.Content, "```json\n{\n  \"service\": \"api \\u0060\\u0060\\u0060\\u202e <@1>\"\n}\n```") {
		t.Fatalf("short arguments: %q", r.Content)
	}
	if bad := liveMarkup(r.Content); len(bad) != 0 {
		t.Fatalf("reply is live: %v", bad)
	}
}

// FuzzRenderCard: whatever the model, a tool, a rule or a person wrote,
// the card (and a grant's notice) holds no live mention, broadcast,
// spoiler, link, emoji shortcode or hidden character, and stays within
// Discord's limits: 2000 characters of content, 10 embeds, 5 rows of at
// most 5 buttons.
func FuzzRenderCard(f *testing.F) {
	h := hostileCard()
	f.Add(h.Calls[0].Summary, h.Calls[0].Args[:400], h.Intro, h.Calls[1].Tool, "@everyone", 3)
	f.Add("", "", "", "", "", 0)
	f.Add(strings.Repeat("*", 300), strings.Repeat("`", 400), strings.Repeat("\\", 300), strings.Repeat("<@1>", 20), strings.Repeat("||", 100), 13)
	f.Add("a\\", "\\`", "x\n>y\n#z", "\u202e", "\r\x1b", 1)
	f.Add("s", "{}", "i", "t", strings.Repeat("**<@&1>", 40), 11)
	f.Fuzz(func(t *testing.T, summary, args, intro, tool, said string, n int) {
		cd := sampleCard()
		cd.Intro = intro
		cd.Calls = nil
		n = n % 14
		if n < 0 {
			n = -n
		}
		cd.GrantFor = time.Duration(n) * 7 * time.Minute
		// said is also a person's id (voters, deciders, approver sets): a
		// snowflake is named as a mention, which never pings (empty
		// allowed_mentions). Digits hold nothing to escape, so no text
		// field can write such a mention itself.
		live := liveMarkup
		if isSnowflake(said) {
			ids := strings.NewReplacer("<@"+said+">", " ", "<@&"+said+">", " ", "<#"+said+">", " ")
			live = func(s string) []string { return liveMarkup(ids.Replace(s)) }
		}
		at := time.Date(2026, 11, 29, 16, 6, 0, 0, time.UTC)
		for i := range n {
			c := card.Call{Ref: confirm.Ref("abcdefghijklmnopqrstuvwxyz", i), Number: i + 1, Key: fmt.Sprint(i), Tool: tool, Summary: summary, Args: args,
				Flagged: true, Approvals: 1 + i%3, Grantable: i%3 == 0, State: card.State{Kind: card.Waiting},
				Reasons: []confirm.Reason{{Kind: confirm.ReasonRule, Rule: said}, {Kind: confirm.ReasonKind(said)}}}
			for j := range i % 3 {
				by := said
				if j%2 == 1 {
					by = moderator
				}
				c.Votes = append(c.Votes, confirm.Vote{By: by, At: at})
			}
			if i%4 == 0 {
				c.Restrict = []confirm.Approvers{{Users: []string{said, moderator}, Roles: []string{said, modRole}, Groups: []string{said}}, {Users: []string{said}}}
			}
			c.Editable = i%2 == 0
			if i%5 == 0 {
				c.Edited = &card.Edit{By: said, At: at, Changes: []card.Change{{Key: said, Before: said, After: summary}, {Key: tool, After: said}}}
			}
			switch i % 10 {
			case 1:
				c.State = card.State{Kind: card.Denied, By: moderator, At: &at, Reason: said}
			case 2:
				c.Flagged, c.State, c.Run, c.Result = false, card.State{Kind: card.AllowedByPolicy}, confirm.RunFailed, said
			case 3:
				c.State = card.State{Kind: card.NotRun, Message: said}
			case 4:
				c.State = card.State{Kind: card.Withdrawn, By: said, At: &at, Reason: said}
			case 5:
				c.Flagged, c.State = false, card.State{Kind: card.DeniedByRule, Rule: said, Message: said}
			case 6:
				c.State, c.Run = card.State{Kind: card.Allowed, By: said, At: &at}, confirm.RunUnknown
			case 7:
				c.State, c.Run = card.State{Kind: card.AllowedByGrant, GrantID: said}, confirm.RunSucceeded
			case 8:
				c.Flagged, c.State = false, card.State{Kind: card.Invalid, Message: said}
			case 9:
				c.State = card.State{Kind: card.Kind(said), By: said, Message: said, Reason: said}
			}
			cd.Calls = append(cd.Calls, c)
		}
		if n > 0 {
			cd.ExtendRef, cd.ExtendBy = cd.Calls[0].Ref, time.Duration(n)*time.Minute
		}
		if n%3 == 1 {
			cd.Extended = &card.Extension{By: said, At: at}
		}
		for i := range n % 5 {
			cd.Escalations = append(cd.Escalations, card.Escalation{At: at.Add(time.Duration(i) * time.Minute), Fired: i%2 == 0,
				Mention: confirm.Approvers{Users: []string{said}, Roles: []string{said, modRole}, Groups: []string{said}}, Approvers: confirm.Approvers{Users: []string{said}}})
		}
		cd.Copy, cd.ThreadLink = []string{"", card.CopyApprovals, card.CopyDM}[n%3], said
		if n%2 == 0 {
			cd.ThreadLink = JumpBase + guildID + "/" + said
		}
		ptr := card.Pointer{BatchID: cd.BatchID, Channel: said, CardLink: cd.ThreadLink, Calls: cd.Calls}
		if pm := RenderPointer(ptr); runes(pm.Content) > maxContent || len(pm.Components) != 0 || len(live(pm.Content)) != 0 {
			t.Fatalf("pointer %q beyond limits or live: %v", pm.Content, live(pm.Content))
		}
		for _, m := range RenderMessages(cd) {
			if runes(m.Content) > maxContent || len(m.Embeds) > maxEmbeds || len(m.Components) > maxRows {
				t.Fatalf("message beyond limits: %d characters, %d embeds, %d rows", runes(m.Content), len(m.Embeds), len(m.Components))
			}
			texts := []string{m.Content}
			total := 0
			for _, e := range m.Embeds {
				if runes(e.Title) > maxTitle || runes(e.Description) > maxDescription || len(e.Fields) > 25 {
					t.Fatalf("embed beyond limits")
				}
				total += runes(e.Title) + runes(e.Description)
				texts = append(texts, e.Title, e.Description)
				for _, fl := range e.Fields {
					if runes(fl.Value) > maxFieldValue || runes(fl.Name) > 256 || fl.Value == "" {
						t.Fatalf("field %q of %d characters", fl.Name, runes(fl.Value))
					}
					total += runes(fl.Name) + runes(fl.Value)
					texts = append(texts, fl.Value)
				}
				if e.Footer != nil {
					total += runes(e.Footer.Text)
				}
			}
			if total > maxEmbedsTotal {
				t.Fatalf("%d characters over a message's embeds", total)
			}
			for _, s := range texts {
				if bad := live(s); len(bad) != 0 {
					t.Fatalf("live in %q: %v", s, bad)
				}
			}
			checkRows(t, m.Components)
		}
		if len(cd.Calls) > 0 {
			r := ArgsReply(cd.Calls[0])
			if runes(r.Content) > maxContent || len(r.AllowedMentions.Parse) != 0 {
				t.Fatalf("arguments reply beyond limits or may ping")
			}
			if bad := live(r.Content); len(bad) != 0 {
				t.Fatalf("arguments reply live: %v", bad)
			}
		}
		notice := card.GrantNotice{Ref: confirm.GrantRef("abcdefghijklmnopqrstuvwxyz"), Tool: tool, By: said, Until: at.Add(time.Hour)}
		for _, nm := range []CardMessage{RenderGrantNotice(notice, at), RenderGrantNotice(notice, at.Add(2*time.Hour))} {
			if runes(nm.Content) > maxContent || len(nm.Components) > 1 {
				t.Fatalf("notice beyond limits")
			}
			if bad := live(nm.Content); len(bad) != 0 {
				t.Fatalf("notice live in %q: %v", nm.Content, bad)
			}
			checkRows(t, nm.Components)
		}
		notice.RevokedBy, notice.RevokedAt = said, &at
		if nm := RenderGrantNotice(notice, at); len(nm.Components) != 0 || len(live(nm.Content)) != 0 || runes(nm.Content) > maxContent {
			t.Fatalf("revoked notice %q", nm.Content)
		}
	})
}

// checkRows checks action rows against Discord's limits.
func checkRows(t *testing.T, rows []discordgo.MessageComponent) {
	t.Helper()
	for _, row := range rows {
		ar := row.(discordgo.ActionsRow)
		if len(ar.Components) == 0 || len(ar.Components) > maxButtons {
			t.Fatalf("a row of %d buttons", len(ar.Components))
		}
		for _, c := range ar.Components {
			b := c.(discordgo.Button)
			if len(b.CustomID) > maxCustomID || runes(b.Label) > 80 || b.Label == "" {
				t.Fatalf("button beyond limits: %+v", b)
			}
			if _, _, ok := parseCustomID(b.CustomID); !ok {
				t.Fatalf("button custom_id %q does not parse", b.CustomID)
			}
		}
	}
}

// A server's question is inert: its message, its fields' titles and its
// answers cannot ping, link or format; the form's labels show hidden
// characters escaped.
func TestQuestionIsInert(t *testing.T) {
	hostile := "@everyone <@&" + modRole + "> [x](http://evil) ||spoiler|| **b** \u202egnp"
	n := card.QuestionNotice{Ref: confirm.QuestionRef("q1"), Server: "deployer", Tool: "deployer__ship", Message: hostile,
		Fields: []confirm.QuestionField{{Name: "env", Title: hostile, Type: "string"}}, Status: confirm.QuestionPending,
		Expires: time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)}
	for _, st := range []confirm.QuestionStatus{confirm.QuestionPending, confirm.QuestionAccepted} {
		n.Status = st
		n.By, n.Answer = "1100000000000000303", map[string]any{"env": hostile}
		m := RenderQuestion(n)
		// Airlock's own markup (bold words, a person, a time) aside, the
		// server's words are escaped wherever they appear.
		for _, live := range []string{" @everyone", "\n@everyone", "<@&", "[x](", "||spoiler", "**b**"} {
			if strings.Contains(m.Content, live) {
				t.Errorf("%s: %q live in %q", st, live, m.Content)
			}
		}
		if !strings.Contains(shown(m.Content), "@everyone") || !strings.Contains(m.Content, `\u202egnp`) {
			t.Errorf("%s: the message is not shown, escaped: %q", st, m.Content)
		}
	}
	d := AnswerModal(n.Ref, n)
	in := d.Components[0].(discordgo.ActionsRow).Components[0].(discordgo.TextInput)
	if strings.Contains(in.Label, "\u202e") || in.CustomID != answerInputID(0) {
		t.Errorf("the input %+v", in)
	}
}
