package slacktest

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// Slack's limits on a message's (and a modal's) blocks, as the fake
// enforces them: what real Slack refuses, the fake refuses with Slack's
// error code, so a test finds a card Slack would not show.
const (
	MaxMessageBlocks = 50    // blocks in a message (invalid_blocks)
	MaxModalBlocks   = 100   // blocks in a modal (invalid_blocks)
	MaxSectionText   = 3000  // a section's text
	MaxHeaderText    = 150   // a header's text
	MaxContextItems  = 10    // elements of a context block
	MaxActionItems   = 25    // elements of an actions block
	MaxButtonText    = 75    // a button's label and accessibility label
	MaxButtonValue   = 2000  // a button's value
	MaxID            = 255   // a block_id or action_id
	MaxMessageText   = 40000 // a message's top-level text (msg_too_long)
	// MaxBlocksText is the most text (characters of every "text" in the
	// blocks, rich text's included) a message's blocks may hold. Slack
	// refuses more with msg_blocks_too_long; it documents 12,000 for
	// markdown blocks only, and refuses all kinds of blocks at about that
	// total (measured near 13,000 of markdown, less with other blocks
	// beside it), so the fake holds every message to 12,000.
	MaxBlocksText = 12000
)

// CheckMessage is Slack's error for a message (its blocks as JSON, its
// text) past Slack's limits, "" for one Slack takes: what chat.postMessage
// and chat.update answer.
func CheckMessage(rawBlocks json.RawMessage, text string) string {
	return checkMessage(rawBlocks, text)
}

// checkMessage is Slack's answer to a message's blocks and text that
// break a limit ("" when they keep them all).
func checkMessage(rawBlocks json.RawMessage, text string) string {
	if utf8.RuneCountInString(text) > MaxMessageText {
		return "msg_too_long"
	}
	if len(rawBlocks) == 0 || string(rawBlocks) == "null" {
		return ""
	}
	var blocks []map[string]any
	if json.Unmarshal(rawBlocks, &blocks) != nil {
		return "invalid_blocks_format"
	}
	if len(blocks) > MaxMessageBlocks {
		return "invalid_blocks"
	}
	if err := checkBlocks(blocks); err != nil {
		return "invalid_blocks"
	}
	if textIn(blocks) > MaxBlocksText {
		return "msg_blocks_too_long"
	}
	return ""
}

// checkView is Slack's answer to a modal's blocks that break a limit.
func checkView(rawBlocks json.RawMessage) string {
	var blocks []map[string]any
	if len(rawBlocks) == 0 || json.Unmarshal(rawBlocks, &blocks) != nil {
		return ""
	}
	if len(blocks) > MaxModalBlocks || checkBlocks(blocks) != nil {
		return "invalid_blocks"
	}
	return ""
}

// checkBlocks checks each block's own limits and that block ids are
// unique.
func checkBlocks(blocks []map[string]any) error {
	ids := map[string]bool{}
	for i, b := range blocks {
		if id, ok := b["block_id"].(string); ok {
			if utf8.RuneCountInString(id) > MaxID || ids[id] {
				return fmt.Errorf("block %d: block_id %q too long or not unique", i, id)
			}
			ids[id] = true
		}
		switch b["type"] {
		case "header":
			if runes(textOf(b["text"])) > MaxHeaderText {
				return fmt.Errorf("block %d: header text over %d", i, MaxHeaderText)
			}
		case "section":
			if runes(textOf(b["text"])) > MaxSectionText {
				return fmt.Errorf("block %d: section text over %d", i, MaxSectionText)
			}
		case "context":
			if els, _ := b["elements"].([]any); len(els) > MaxContextItems {
				return fmt.Errorf("block %d: %d context elements", i, len(els))
			}
		case "actions":
			els, _ := b["elements"].([]any)
			if len(els) > MaxActionItems {
				return fmt.Errorf("block %d: %d actions", i, len(els))
			}
			actions := map[string]bool{}
			for _, e := range els {
				el, _ := e.(map[string]any)
				id, _ := el["action_id"].(string)
				if runes(id) > MaxID || (id != "" && actions[id]) {
					return fmt.Errorf("block %d: action_id %q too long or not unique", i, id)
				}
				actions[id] = true
				if el["type"] != "button" {
					continue
				}
				value, _ := el["value"].(string)
				label, _ := el["accessibility_label"].(string)
				if runes(textOf(el["text"])) > MaxButtonText || runes(value) > MaxButtonValue || runes(label) > MaxButtonText {
					return fmt.Errorf("block %d: a button over its limits", i)
				}
			}
		}
	}
	return nil
}

// textIn counts the characters of every "text" string in v.
func textIn(v any) int {
	n := 0
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if s, ok := e.(string); ok && k == "text" {
				n += runes(s)
				continue
			}
			n += textIn(e)
		}
	case []map[string]any:
		for _, e := range v {
			n += textIn(e)
		}
	case []any:
		for _, e := range v {
			n += textIn(e)
		}
	}
	return n
}

// TextIn is the text a message's blocks (JSON) hold, as the fake counts
// it against MaxBlocksText.
func TextIn(rawBlocks string) int {
	var v any
	if json.Unmarshal([]byte(rawBlocks), &v) != nil {
		return 0
	}
	return textIn(v)
}

// textOf is a text object's text.
func textOf(v any) string {
	m, _ := v.(map[string]any)
	s, _ := m["text"].(string)
	return s
}

func runes(s string) int { return utf8.RuneCountInString(s) }
