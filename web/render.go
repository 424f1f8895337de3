package web

import (
	"html"
	"html/template"
	"io/fs"
	"strings"
	"time"

	"github.com/airlockhq/airlock/card"
)

// The console lays out the card's typed parts as HTML; it chooses none
// of their words. Every text from outside Airlock (arguments, read-backs,
// reasons, results, names) is escaped: it is shown, never run or
// followed.

var funcs = template.FuncMap{
	"parts": partsHTML,
	"line":  func(l card.Line) template.HTML { return partsHTML(l.Parts) },
	"when":  func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") },
	"join":  func(ss []string) string { return strings.Join(ss, ", ") },
	"actions": func(c card.Card, call card.Call) []card.Action {
		return c.Actions(call, nil)
	},
	"isAllow": func(a card.Action) bool { return a.Kind == card.ActAllow || a.Kind == card.ActAllowTyped },
	"isTyped": func(a card.Action) bool { return a.Kind == card.ActAllowTyped },
	"isDeny":  func(a card.Action) bool { return a.Kind == card.ActDeny },
	"isEdit":  func(a card.Action) bool { return a.Kind == card.ActEdit },
}

// partsHTML is parts as escaped HTML.
func partsHTML(ps []card.Part) template.HTML {
	var b strings.Builder
	esc := html.EscapeString
	for _, p := range ps {
		switch p.Kind {
		case card.Strong:
			b.WriteString("<strong>" + esc(p.Text) + "</strong>")
		case card.Person:
			b.WriteString(`<span class="person">@` + esc(p.Text) + "</span>")
		case card.Time, card.Deadline, card.Clock:
			if p.At.IsZero() {
				b.WriteString(esc(card.UnknownTime))
			} else {
				b.WriteString("<time>" + esc(p.At.UTC().Format("2006-01-02 15:04:05 UTC")) + "</time>")
			}
		case card.Code, card.Output:
			b.WriteString("<code>" + esc(p.Text) + "</code>")
		case card.Quote:
			b.WriteString(`<q>` + esc(p.Text) + "</q>")
		case card.Channel:
			b.WriteString(`<span class="channel">#` + esc(p.Text) + "</span>")
		case card.People:
			b.WriteString(esc(peopleText(p)))
		case card.Link:
			// Links go to chat permalinks: the console shows none.
		default: // Words, Label, Control
			b.WriteString(esc(p.Text))
		}
	}
	return template.HTML(b.String()) //nolint:gosec // every text above is escaped
}

func peopleText(p card.Part) string {
	var names []string
	for _, u := range p.Who.Users {
		names = append(names, "@"+u)
	}
	for _, g := range p.Who.Groups {
		names = append(names, card.GroupWord+" "+g)
	}
	for _, r := range p.Who.Roles {
		names = append(names, card.RoleWord+" "+r)
	}
	if len(names) == 0 {
		return card.Nobody
	}
	return strings.Join(names, ", ")
}

func mustSub(f fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(f, dir)
	if err != nil {
		panic(err) // the embedded tree is the package's own
	}
	return sub
}
