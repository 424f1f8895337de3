package card

import (
	"strconv"
	"time"
)

// Home is a person's home view in chat (Slack's Home tab): the requests
// waiting on them and their own recent requests, each with a link to its
// card and, with the web console, to its page. Renderers lay out the
// lines; the words are here.
type Home struct {
	Waiting []HomeItem
	Mine    []HomeItem
}

// HomeItem is one request on the home view.
type HomeItem struct {
	BatchID   string
	Tools     []string // of the calls that wait (untrusted)
	Waiting   int
	Channel   string // the conversation's channel id
	Requester string // a platform user id
	ExpiresAt time.Time
	CardURL   string // a permalink of its card ("" unknown)
	PageURL   string // its page on the web console ("" none)
}

// Headings and empty words of the home view.
const (
	HomeTitle      = "Airlock"
	HomeWaiting    = "Waiting on you"
	HomeMine       = "Your requests"
	HomeNoWaiting  = "Nothing waits on you."
	HomeNoRequests = "You asked for nothing in the last week."
	HomeFoot       = "Updated when you open this tab."
)

// Line is the item as one line: its tools, where, who asked, until when,
// and its links.
func (i HomeItem) Line(mine bool) Line {
	var ps []Part
	for j, t := range i.Tools {
		if j > 0 {
			ps = append(ps, words(", "))
		}
		ps = append(ps, Part{Kind: Code, Text: t})
	}
	if len(i.Tools) == 0 {
		ps = append(ps, words("Request "+i.BatchID))
	}
	ps = append(ps, words(" in "), Part{Kind: Channel, Text: i.Channel})
	if !mine {
		ps = append(ps, words(", asked by "), Part{Kind: Person, Text: i.Requester})
	}
	if i.Waiting > 0 {
		ps = append(ps, words(" · "+strconv.Itoa(i.Waiting)+" "+Plural(i.Waiting, "call waits", "calls wait")+" until "), Part{Kind: Deadline, At: i.ExpiresAt})
	} else {
		ps = append(ps, words(" · decided"))
	}
	if i.CardURL != "" {
		ps = append(ps, Part{Kind: Link, Lead: " · ", Text: "View the card", URL: i.CardURL})
	}
	if i.PageURL != "" {
		ps = append(ps, Part{Kind: Link, Lead: " · ", Text: PageLinkWords, URL: i.PageURL})
	}
	icon := IconWaiting
	if mine {
		icon = IconNone
	}
	return Line{Icon: icon, Parts: ps}
}
