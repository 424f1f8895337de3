package slack

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/adapters/internal/visible"
)

// What a person reading a message sees, and what Slack would act on.

// readBlocks walks Block Kit JSON as Slack displays it. Text of mrkdwn
// objects goes to live (Slack parses it: mentions, links, formatting);
// literal text (rich text elements, plain_text) goes to shown as is;
// mentions and dates made with rich text elements are written the way
// mrkdwn writes them, to both.
func readBlocks(t *testing.T, raw []byte) (shown, live string) {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("blocks: %v", err)
	}
	var s, l strings.Builder
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			typ, _ := v["type"].(string)
			switch typ {
			case "mrkdwn":
				text, _ := v["text"].(string)
				s.WriteString(text + "\n")
				l.WriteString(text + "\n")
				return
			case "plain_text":
				text, _ := v["text"].(string)
				s.WriteString(text + "\n")
				if v["emoji"] == true {
					l.WriteString(text + "\n") // shortcodes in it become emoji
				}
				return
			case "text":
				text, _ := v["text"].(string)
				s.WriteString(text)
				return
			case "user":
				m := fmt.Sprintf("<@%v>", v["user_id"])
				s.WriteString(m)
				l.WriteString(m + "\n")
				return
			case "usergroup":
				m := fmt.Sprintf("<!subteam^%v>", v["usergroup_id"])
				s.WriteString(m)
				l.WriteString(m + "\n")
				return
			case "date":
				s.WriteString(fmt.Sprint(v["fallback"]))
				return
			case "channel":
				// A channel reference: shown by name, notifies nobody.
				s.WriteString(fmt.Sprintf("<#%v>", v["channel_id"]))
				return
			case "link":
				s.WriteString(fmt.Sprintf("[%v](%v)", v["text"], v["url"]))
				return
			case "emoji":
				s.WriteString(fmt.Sprintf(":%v:", v["name"]))
				return
			case "rich_text_section", "rich_text_quote", "rich_text_preformatted":
				walk(v["elements"])
				s.WriteString("\n")
				return
			}
			for _, k := range []string{"text", "elements", "fields", "accessory", "blocks", "element", "label"} {
				if e, ok := v[k]; ok {
					walk(e)
				}
			}
		}
	}
	walk(v)
	return s.String(), l.String()
}

// blocksText is what a reader sees of the blocks of a call.
func blocksText(t *testing.T, c apiCall) string {
	t.Helper()
	shown, _ := readBlocks(t, []byte(c.param("blocks")))
	return shown
}

// Airlock's own live entities in mrkdwn: mentions of Slack ids, user
// groups and dates.
var ownEntities = regexp.MustCompile(`<@[UW][A-Z0-9]+>|<!subteam\^S[A-Z0-9]+>|<!date\^\d+\^[^|>]*\|[^>]*>`)

// liveProblems lists what in mrkdwn (or the plain text of a message)
// Slack would act on beyond Airlock's own entities, and any hidden
// character in a whole payload.
func liveProblems(live, whole string) []string {
	var bad []string
	u := ownEntities.ReplaceAllString(live, " ")
	for _, s := range []string{"<", ">", "@channel", "@here", "@everyone", "\u200b"} {
		if strings.Contains(u, s) {
			bad = append(bad, s)
		}
	}
	for _, r := range whole {
		if visible.Hidden(r) && r != '\n' {
			bad = append(bad, fmt.Sprintf("hidden %U", r))
		}
	}
	return bad
}
