package slacktest

import (
	"encoding/json"
	"strings"
)

// Formatted reads Block Kit blocks as JSON (as a chat.postMessage's
// "blocks" holds them): every text in them, joined by newlines (decoded,
// so "<" is "<" again however it was escaped), and the texts Slack
// formats (mrkdwn), where "<!channel>" would ping and "<url|x>" link.
// Every other text is plain, or literal rich text.
func Formatted(blocks []byte) (all string, mrkdwn []string, err error) {
	var v any
	if err := json.Unmarshal(blocks, &v); err != nil {
		return "", nil, err
	}
	var texts []string
	var walk func(any)
	walk = func(x any) {
		switch y := x.(type) {
		case map[string]any:
			if s, ok := y["text"].(string); ok {
				texts = append(texts, s)
				if y["type"] == "mrkdwn" {
					mrkdwn = append(mrkdwn, s)
				}
			}
			for _, z := range y {
				walk(z)
			}
		case []any:
			for _, z := range y {
				walk(z)
			}
		}
	}
	walk(v)
	return strings.Join(texts, "\n"), mrkdwn, nil
}
