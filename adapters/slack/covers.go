package slack

import (
	"strconv"
	"strings"

	"github.com/slack-go/slack"

	"github.com/airlockhq/airlock/adapters/internal/visible"
	cardpkg "github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
)

// maxCoverChars bounds the line of what a yes covers (a context block's
// text holds 3000).
const maxCoverChars = 1500

// coversBlock is the context block under a waiting call's buttons that
// says what a yes covers (card.Card.Cover), or nil for a call nobody
// waits on, or when show is false. Its text is mrkdwn in Airlock's words:
// the tool's name in a code span when it is a plain name, else "this
// tool"; people as the card's footer names them (<@U…> for Slack user
// ids, escaped text otherwise); a grant's end as a date token, each
// reader's time zone, UTC as the fallback.
func coversBlock(c cardpkg.Card, call cardpkg.Call, show bool, k caps) slack.Block {
	if !show {
		return nil
	}
	v, ok := c.Cover(call)
	if !ok {
		return nil
	}
	return slack.NewContextBlock("covers_"+strconv.Itoa(call.Number), mrkdwn(clip(coverText(v.Line().Parts), k.cover)))
}

// coversFit reports whether the cover of every call of calls (a message
// of the card) fits in the blocks left (budget) besides the calls and
// their buttons: a message too long for them shows none, so its calls
// keep their room.
func coversFit(c cardpkg.Card, calls []cardpkg.Call, budget int) bool {
	need := 0
	for _, call := range calls {
		need++
		if len(callActions(c, call, argsPreview(call.Args).cut)) > 0 {
			need++
			if _, ok := c.Cover(call); ok {
				need++
			}
		}
	}
	return need <= budget
}

// coverText writes parts as mrkdwn: Airlock's words escaped (they hold
// no entity, but nothing is assumed), everything else inert: names from
// outside Airlock in code spans (literal), people and channels as
// Slack's tokens for their ids, times as date tokens (each reader's time
// zone, UTC as the fallback), links only when they are Slack's own.
func coverText(ps []cardpkg.Part) string {
	var b strings.Builder
	for _, p := range ps {
		switch p.Kind {
		case cardpkg.Words, cardpkg.Label, cardpkg.Control:
			b.WriteString(escape(p.Text))
		case cardpkg.Strong:
			b.WriteString("*" + escape(p.Text) + "*")
		case cardpkg.Code:
			b.WriteString(literal(p.Text, maxToolChars))
		case cardpkg.Person:
			b.WriteString(coverPerson(p.Text))
		case cardpkg.People:
			b.WriteString(coverPeople(p.Who))
		case cardpkg.Time, cardpkg.Deadline:
			b.WriteString(slackDate(p.At, "{date_short_pretty} at {time}"))
		case cardpkg.Clock:
			b.WriteString(slackDate(p.At, "{time}"))
		case cardpkg.Channel:
			if channelIDPattern.MatchString(p.Text) {
				b.WriteString("<#" + p.Text + ">")
			} else {
				b.WriteString(cardpkg.SomeChannel)
			}
		case cardpkg.Link:
			if u, ok := safeLink(p.URL); ok {
				b.WriteString(escape(p.Lead) + "<" + u + "|" + escape(p.Text) + ">")
			}
		case cardpkg.Quote, cardpkg.Output:
			b.WriteString(escapeClip(oneLine(visible.Reveal(p.Text)), maxReasonChars))
		}
	}
	return b.String()
}

// faceText is a line of the card's face as mrkdwn (a context block's):
// its emoji, then its parts (coverText).
func faceText(l cardpkg.Line) string {
	if e, ok := faceEmojis[l.Icon]; ok {
		return ":" + e + ": " + coverText(l.Parts)
	}
	return coverText(l.Parts)
}

// coverPerson is a person as the footer names them: a mention for a
// Slack user id; anything else as literal code (a span that holds no
// formatting, its backticks a look-alike), "someone" for nobody.
func coverPerson(id string) string {
	switch {
	case userIDPattern.MatchString(id):
		return "<@" + id + ">"
	case strings.TrimSpace(id) == "":
		return cardpkg.Someone
	}
	return literal(id, maxLiteralPersonL)
}

// coverPeople is a set of people as the footer names them (users, then
// groups: a usergroup token for a Slack group id), roles as literal
// words; at most maxPeoplePerSet, the rest counted.
func coverPeople(s confirm.Approvers) string {
	var names []string
	for _, u := range s.Users {
		names = append(names, coverPerson(u))
	}
	for _, g := range s.Groups {
		if groupIDPattern.MatchString(g) {
			names = append(names, "<!subteam^"+g+">")
		} else {
			names = append(names, cardpkg.GroupWord+" "+literal(g, maxLiteralPersonL))
		}
	}
	for _, r := range s.Roles {
		names = append(names, cardpkg.RoleWord+" "+literal(r, maxLiteralPersonL))
	}
	if len(names) == 0 {
		return cardpkg.Nobody
	}
	if len(names) > maxPeoplePerSet {
		rest := len(names) - maxPeoplePerSet
		names = append(names[:maxPeoplePerSet], cardpkg.AndMore(rest))
	}
	return strings.Join(names, ", ")
}

// literal is text from outside Airlock inside mrkdwn: a code span on one
// line, hidden characters shown escaped, entities escaped, its own
// backticks (which would end the span) a look-alike (ˋ).
func literal(s string, n int) string {
	s = strings.ReplaceAll(oneLine(visible.Reveal(s)), "`", "ˋ")
	return "`" + escapeClip(s, n) + "`"
}
