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
	"github.com/airlockhq/airlock/bot"
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

var fenceRE = regexp.MustCompile("(?s)```json\n(.*?)\n```")

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
var ownMarkup = regexp.MustCompile(`<@(` + requester + `|` + moderator + `|` + dmUser + `)>|<@&` + modRole + `>|<t:\d+:[fR]>|\*\*(Approval needed|Approval request|Show full arguments|outcome unknown)\*\*|` + "`channels\\[\\]`")

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
// arguments far longer than a card holds.
func hostileCard() bot.Card {
	at := time.Date(2026, 11, 29, 16, 6, 0, 0, time.UTC)
	evil := "Restart api\u202egnp.exe\u200b <!channel> @everyone <@123456789012345678> [x](http://evil) ||x|| :skull: ```"
	args := "{\n  \"note\": \"" + evil + " " + strings.Repeat("A", 3000) + "\",\n  \"service\": \"api\u202e\"\n}"
	c := sampleCard()
	c.Intro = "Trust me @here ||x|| [click](http://evil) <@&" + modRole + ">\n# Approved already\n> quoted \u2066isolate\u2069"
	c.Calls = []bot.CardCall{
		{Ref: "abcdefghijklmnopqrstuvwxyz.0", Number: 1, Key: "c1", Tool: "restart_service", Summary: evil, Args: args, Flagged: true, Decision: confirm.DecisionPending,
			FlagReason: "a call of this tool with these arguments had an unknown outcome ||x||"},
		{Ref: "abcdefghijklmnopqrstuvwxyz.1", Number: 2, Key: "c2", Tool: "evil`tool@everyone", Summary: "", Args: "{}", Flagged: true, Decision: confirm.DecisionDenied,
			DecidedBy: moderator, DecidedAt: &at, DenyMessage: confirm.DefaultDenyMessage + ` Reason given by the approver (` + moderator + `): "@everyone <@1> ||no|| :skull:"`},
		{Ref: "abcdefghijklmnopqrstuvwxyz.2", Number: 3, Key: "c3", Tool: "service_status", Summary: "status", Args: "{}", Decision: confirm.DecisionAllowedByPolicy,
			DecidedBy: bot.PolicyActor, DecidedAt: &at, Run: confirm.RunFailed, Result: "HTTP 500: <@&" + otherRole + "> [x](http://evil) \x1b[2J"},
	}
	return c
}

func TestHostileCardIsInert(t *testing.T) {
	card := hostileCard()
	golden(t, "card_hostile.json", render(card))
	for _, m := range RenderMessages(card) {
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
	_, embeds, components := Render(card)
	if !strings.Contains(embeds[0].Description, `\u202egnp`) || !strings.Contains(field(embedMap(t, embeds[0]), "Arguments"), `\u0060\u0060\u0060`) {
		t.Errorf("the bidi override or the backticks are not shown escaped: %q", embeds[0].Description)
	}
	args := field(embedMap(t, embeds[0]), "Arguments")
	if !strings.Contains(args, "more characters hidden") || !strings.Contains(args, "Show full arguments") {
		t.Errorf("cut arguments do not say so: %q", args)
	}
	if why := field(embedMap(t, embeds[0]), flagReasonLabel); shown(why) != card.Calls[0].FlagReason {
		t.Errorf("flag reason %q", why)
	}
	_, _, _, show := buttonIDsAll(t, componentMaps(t, components))
	if len(show) != 1 || show[0] != "al:s:"+card.Calls[0].Ref {
		t.Errorf("show-arguments buttons %v", show)
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

// FuzzRenderCard: whatever the model, a tool or a person wrote, the card
// holds no live mention, broadcast, spoiler, link, emoji shortcode or
// hidden character, and stays within Discord's limits.
func FuzzRenderCard(f *testing.F) {
	h := hostileCard()
	f.Add(h.Calls[0].Summary, h.Calls[0].Args[:400], h.Intro, h.Calls[1].Tool, "@everyone", 3)
	f.Add("", "", "", "", "", 0)
	f.Add(strings.Repeat("*", 300), strings.Repeat("`", 400), strings.Repeat("\\", 300), strings.Repeat("<@1>", 20), strings.Repeat("||", 100), 13)
	f.Add("a\\", "\\`", "x\n>y\n#z", "\u202e", "\r\x1b", 1)
	f.Fuzz(func(t *testing.T, summary, args, intro, tool, said string, n int) {
		card := sampleCard()
		card.Intro = intro
		card.Calls = nil
		n = n % 14
		if n < 0 {
			n = -n
		}
		at := time.Date(2026, 11, 29, 16, 6, 0, 0, time.UTC)
		for i := range n {
			c := bot.CardCall{Ref: confirm.Ref("abcdefghijklmnopqrstuvwxyz", i), Number: i + 1, Key: fmt.Sprint(i), Tool: tool, Summary: summary, Args: args,
				Flagged: true, Decision: confirm.DecisionPending, FlagReason: said}
			switch i % 4 {
			case 1:
				c.Decision, c.DecidedBy, c.DecidedAt = confirm.DecisionDenied, moderator, &at
				c.DenyMessage = confirm.DefaultDenyMessage + " Reason given by the approver (" + moderator + "): " + fmt.Sprintf("%q", said)
			case 2:
				c.Flagged, c.Decision, c.DecidedBy, c.Run, c.Result = false, confirm.DecisionAllowedByPolicy, bot.PolicyActor, confirm.RunFailed, said
			case 3:
				c.Decision, c.DecidedBy, c.DenyMessage = confirm.DecisionDenied, bot.SystemActor, said
			}
			card.Calls = append(card.Calls, c)
		}
		for _, m := range RenderMessages(card) {
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
				if bad := liveMarkup(s); len(bad) != 0 {
					t.Fatalf("live in %q: %v", s, bad)
				}
			}
			for _, row := range m.Components {
				for _, c := range row.(discordgo.ActionsRow).Components {
					b := c.(discordgo.Button)
					if len(b.CustomID) > maxCustomID || runes(b.Label) > 80 {
						t.Fatalf("button beyond limits: %+v", b)
					}
				}
			}
		}
		if len(card.Calls) > 0 {
			r := ArgsReply(card.Calls[0])
			if runes(r.Content) > maxContent || len(r.AllowedMentions.Parse) != 0 {
				t.Fatalf("arguments reply beyond limits or may ping")
			}
			if bad := liveMarkup(r.Content); len(bad) != 0 {
				t.Fatalf("arguments reply live: %v", bad)
			}
		}
	})
}
