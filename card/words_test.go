package card

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The adapters choose no words: what a card, a run message, a notice or
// a form says is written here, in package card, and the renderers only
// lay it out. TestAdaptersChooseNoWords reads the adapters' source (not
// their tests, not their fakes) and fails on any string literal that
// reads as words, two or more ("waiting for a decision"), or one
// capitalised ("Cancel"), unless it is listed below with why it is not a
// card's: what the adapters say outside the card (answers to clicks and
// commands, the terminal's help, the Discord moderation tools' own
// words), and what no person sees as a card (errors of payloads, names
// of operations in logs). Errors built with fmt.Errorf or errors.New and
// the texts of log calls are not read. A literal that moved or went away
// must leave the list too, so the list stays what the adapters hold.

// prose is a literal that reads as words.
var prose = regexp.MustCompile(`[A-Za-z]{2,}[,;:.!?]? +[A-Za-z]{2,}|^[A-Z][a-z]+[.…:!?]?$`)

// notCardWords are the adapters' own words, by why they are theirs. An
// entry ending in "…" stands for every literal it begins.
var notCardWords = map[string][]string{
	// Answers to a click that could not be worked, sent to its clicker
	// alone, and the bot's answers in a conversation. They belong to the
	// click dispatch (issue 35 item 2), which moves them.
	"answers to a click or a mention": {
		"I could not open the reason form. Use Deny, or try again.",
		"This card no longer waits for a decision, so its arguments are not shown here. The audit log keeps them.",
		"I could not open the arguments. Try again.",
		"This call's arguments are too large to edit in Slack (%s; a Slack form holds %s). Allow or deny it as it is. Nothing changed.",
		"I could not open the edit form. Try again. Nothing changed.",
		"These arguments can't be used.",
		"Your edit was not applied: ",
		" Nothing changed.",
		"I could not open the confirmation form. Try again. Nothing changed.",
		"I could not open the answer form. Try again. Nothing changed.",
		"This card no longer waits for a decision, or has no preview to show.",
		"I could not open the preview. Try again.",
		"I have no commands. Mention me in a channel to start a conversation.",
		"This call's arguments are too large to edit in Discord (%s; a form holds at most %s). Allow or deny it as it is. Nothing changed.",
		"the arguments are not valid",
		"Edit refused: ",
		". Nothing changed.",
		"This card no longer waits for a decision, so its preview is not shown here.",
		"Hi! Mention me with what you need, for example: “@Airlock what is the status of the api service?”",
		"(mentioned you without a message)",
		"Airlock", // a Discord thread's name
	},
	// The terminal's commands: its help, usage and answers. They name
	// its commands, which are its buttons.
	"the terminal's commands": {
		"Type a message to talk to the agent. Commands:…",
		"airlock chat: you are %q. /help lists the commands.\n",
		"A card is still waiting from before:\n",
		"%d cards are still waiting from before, oldest first; %s\n",
		"Unknown command %s. /help lists the commands.\n",
		"No card is waiting.\n",
		"%d cards are waiting, oldest first; %s\n",
		"/allow, /deny, /args, /edit and /extend act on the newest (request ",
		"), the next one once it is decided; /stop RUN stops a run and denies its waiting step.",
		"Which call? For example: /allow 1, /deny 2 not today, /allow all\n",
		"/allow takes call numbers only.\n",
		"%q is not a call number of the card (1-%d).\n",
		"Call %d is not waiting for a decision (%s).\n",
		"edit refused: ",
		"Usage: /edit N {\"key\": \"value\", ...} allows call N with these arguments instead (JSON on one line; the tool and the rules check them again). /edit N alone shows its arguments.",
		"%q is not a call number of the card (1-%d).\n%s\n",
		"Call %d's arguments can't be edited here; /allow or /deny it.\n",
		"To allow it with other arguments, type this line with your changes:\n/edit %d %s\n",
		"To allow it with other arguments, type /edit %d and the whole JSON on one line.\n",
		"/extend takes nothing after it.\n",
		"This card was already extended by %s; it expires at %s.\n",
		"This card can't be extended.\n",
		"+-- /allow N  /deny N [reason]  /allow all  /deny all [reason]  /args N",
		"/checked lists runs to mark checked",
		"Usage: /checked lists runs whose outcome is unknown; /checked N marks run N checked once you know whether it took effect.",
		"No run with an unknown outcome waits to be checked.\n",
		"Runs whose outcome is unknown (each gates its tool until checked):\n",
		"%q is not a run number (1-%d); /checked lists them.\n",
		"Marked checked: call %d (%s) of request %s.\n",
	},
	// The Discord moderation tools are tools: their schema, their
	// read-back and their results are the tool's words, shown as any
	// tool's, inert.
	"the Discord moderation tools": {
		`"user":{"type":"string","pattern":"^[0-9]{1,20}$","description":"The member's user id (a snowflake, digits only)."},`,
		`"duration":{"type":"string","pattern":"^([0-9]+[smhdw])+$","description":"How long, e.g. 10m, 1h30m, 2d; at least 1s, at most 28d."},`,
		`"reason":{"type":"string","minLength":1,"maxLength":400,"description":"Why; shown to the approver and written to the audit log."}},`,
		`"user":{"type":"string","pattern":"^[0-9]{1,20}$","description":"The user id to ban (a snowflake, digits only)."},`,
		`"reason":{"type":"string","minLength":1,"maxLength":400,"description":"Why; shown to the approver and written to the audit log."},`,
		`"delete_message_days":{"type":"integer","minimum":0,"maximum":7,"description":"Delete the user's messages of the last N days (0 to 7; default 0)."}},`,
		`"channel":{"type":"string","pattern":"^[0-9]{1,20}$","description":"The id of the channel (or thread) holding the message."},`,
		`"message":{"type":"string","pattern":"^[0-9]{1,20}$","description":"The message id."}},`,
		"Time out a member of this Discord server: they cannot write, react or speak for the duration. Needs a moderator's approval.",
		"Kick a member from this Discord server (they may join again with an invite). Needs a moderator's approval.",
		"Ban a user from this Discord server, optionally deleting their recent messages. Needs a moderator's approval.",
		"Delete one message in a channel of this Discord server. Needs a moderator's approval.",
		"must be a JSON object",
		"/%s: not allowed",
		"/%s: must be a string",
		"/%s: must be a Discord id (1 to 20 digits)",
		"/reason: must not be empty",
		"/reason: at most %d characters",
		"/reason: must not hold control, bidi or invisible characters",
		"/delete_message_days: must be an integer from 0 to 7",
		"Time out <@%s> for %s. Reason: %s",
		"Kick <@%s> from the server. Reason: %s",
		"Ban <@%s> from the server; their messages stay. Reason: %s",
		"Ban <@%s> from the server and delete their messages of the last day. Reason: %s",
		"Ban <@%s> from the server and delete their messages of the last %d days. Reason: %s",
		"Delete message %s in <#%s>",
		"Approved by ",
		"Allowed by policy",
		"Allowed by grant ",
		" via Airlock",
		"Timed out <@%s> until %s.",
		"Deleted message %s in <#%s>.",
		"time out",
		"moderation tools act only in a conversation in a Discord server",
		"moderation tools act only in a conversation in a Discord server, not in a direct message",
		"<@%s> owns this server, and Discord lets nobody %s the owner",
		"<@%s> is not a member of this server, so there is nobody to %s",
		"Airlock's role is not above <@%s>'s highest role (they hold the same role), so it cannot %s them; move Airlock's role above theirs in Server Settings → Roles",
		"Airlock's role is below <@%s>'s highest role, so it cannot %s them; move Airlock's role above theirs in Server Settings → Roles",
		"<@%s> has the Administrator permission, and Discord lets nobody time out an administrator",
	},
	// Payloads a platform sent that could not be read, and answers to
	// the platform itself: logged, or answered over HTTP to Slack.
	"payload and protocol errors": {
		"malformed JSON: %v",
		"url_verification without a challenge",
		"event_callback without an event_id",
		"event_callback %s without an event",
		"event_callback %s: malformed event: %v",
		"event_callback %s: event without a type",
		"no type",
		"event type ",
		"hidden message",
		"app_home_opened: not the Home tab, or no user",
		"no user",
		"from the bot itself",
		"%s %s: missing or malformed channel",
		"%s %s: missing or malformed ts",
		"%s %s: malformed thread_ts",
		"app_mention in a G or D conversation: taken from its message event, which says whether it is a group DM",
		"mention: handled by its app_mention event",
		"not in a thread",
		"channel type ",
		"Allow", // an HTTP header's name
		"application/json; charset=utf-8",
		" not recorded",
		"interaction not recorded",
		"%s: missing or malformed user id",
		"block_actions without an action",
		"unknown action_id %q",
		"%s: missing or malformed channel",
		"%s: the message's channel is not the click's",
		"%s: container and message disagree on the message",
		"%s: missing or malformed message ts",
		"%s: malformed thread_ts",
		"%s: missing trigger_id",
		"view_submission without a view",
		"view_submission of unknown view %q",
		"view_submission: malformed private_metadata",
		"view_submission: private_metadata holds no %s reference",
		"view_submission: more inputs than a form holds",
		"view_submission: inputs the form does not have",
		"view_submission: private_metadata holds no channel",
		"view_submission: malformed thread in private_metadata",
		"view_submission: private_metadata holds no card message",
		"view_submission: malformed card message in private_metadata",
		"view_submission without a value",
		"%s: button value is not a %s reference",
		"view_submission: a value longer than the form holds",
		"unsupported interaction type %q",
		" (authentication failed: check discord.token, the bare bot token)",
		" (intents refused: enable the Message Content intent under Bot → Privileged Gateway Intents in the Developer Portal)",
	},
	// What an operation is called in logs and in the errors it returns.
	"names of operations in logs": {
		"unknown outcome", "grant notice", "edit answer", "replayed interaction", "replayed event ",
		"card message", "PATCH message", "run message",
		"deny reason", "reason modal", "edit modal", "phrase modal", "answer modal",
	},
}

func TestAdaptersChooseNoWords(t *testing.T) {
	listed := map[string]bool{}
	var prefixes []string
	for _, ws := range notCardWords {
		for _, w := range ws {
			if p, ok := strings.CutSuffix(w, "…"); ok {
				prefixes = append(prefixes, p)
			}
			listed[w] = false
		}
	}
	known := func(s string) (string, bool) {
		if _, ok := listed[s]; ok {
			return s, true
		}
		for _, p := range prefixes {
			if strings.HasPrefix(s, p) {
				return p + "…", true
			}
		}
		return "", false
	}
	var unlisted []string
	lits := adapterWords(t, "../adapters/slack", "../adapters/discord", "../adapters/shell")
	t.Logf("%d literals in the adapters read as words", len(lits))
	for _, lit := range lits {
		if k, ok := known(lit.text); ok {
			listed[k] = true
			continue
		}
		unlisted = append(unlisted, lit.where+": "+strconv.Quote(lit.text))
	}
	if len(unlisted) > 0 {
		t.Errorf("%d literals in the adapters read as words of their own: write them in package card (a card's, a notice's or a form's part) and lay them out, or list them in notCardWords with why they are not a card's:\n%s",
			len(unlisted), strings.Join(unlisted, "\n"))
	}
	var gone []string
	for w, seen := range listed {
		if !seen {
			gone = append(gone, strconv.Quote(w))
		}
	}
	sort.Strings(gone)
	if len(gone) > 0 {
		t.Errorf("listed in notCardWords but no longer in the adapters (take them off the list):\n%s", strings.Join(gone, "\n"))
	}
}

// TestProseFindsWords: the check reads a sentence, a label and a
// capitalised word as words; ids, formats, file names and markup not.
func TestProseFindsWords(t *testing.T) {
	for s, want := range map[string]bool{
		"waiting for a decision": true, "Cancel": true, "Reason: ": false, "Show full arguments": true,
		"… %s of the preview.": true, "airlock_allow": false, "{date_short_pretty} at {time}": false,
		"arguments.json": false, "  ·  ": false, "%d. %s": false, "hourglass_flowing_sand": false, "Expires": true,
	} {
		if got := prose.MatchString(s); got != want {
			t.Errorf("%q: prose %v, want %v", s, got, want)
		}
	}
}

type literal struct{ where, text string }

// adapterWords are the string literals in dirs' non-test Go files (not in
// their subdirectories: the fakes) that read as words, but for those in
// errors made by fmt.Errorf or errors.New, log calls and struct tags.
func adapterWords(t *testing.T, dirs ...string) []literal {
	t.Helper()
	var out []literal
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no Go files (%v)", dir, err)
		}
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, src, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.ImportSpec, *ast.Field:
					return false // import paths, struct tags
				case *ast.CallExpr:
					return !notShown(n)
				case *ast.BasicLit:
					if n.Kind != token.STRING {
						return false
					}
					s, err := strconv.Unquote(n.Value)
					if err == nil && prose.MatchString(s) {
						out = append(out, literal{filepath.Base(path) + ":" + strconv.Itoa(fset.Position(n.Pos()).Line), s})
					}
				}
				return true
			})
		}
	}
	return out
}

// notShown reports whether a call's literals make an error value or a
// log line: fmt.Errorf, errors.New, and the methods of a logger (log,
// slog, a.log).
func notShown(c *ast.CallExpr) bool {
	sel, ok := c.Fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	switch x := sel.X.(type) {
	case *ast.Ident:
		switch {
		case x.Name == "fmt" && sel.Sel.Name == "Errorf", x.Name == "errors" && sel.Sel.Name == "New",
			x.Name == "http" && sel.Sel.Name == "Error", x.Name == "slog", x.Name == "log":
			return true
		}
	case *ast.SelectorExpr:
		return x.Sel.Name == "log" // a.log.Error(…), a.log.With(…)
	case *ast.CallExpr: // a.log.With(…).Info(…)
		if inner, ok := x.Fun.(*ast.SelectorExpr); ok {
			if s, ok := inner.X.(*ast.SelectorExpr); ok && s.Sel.Name == "log" {
				return true
			}
		}
	}
	return false
}
