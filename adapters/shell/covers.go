package shell

import cardpkg "github.com/airlockhq/airlock/card"

// covers is what a yes covers on a waiting call (card.Card.Cover), on
// one line, escaped; "" for a call nobody waits on. The terminal offers
// no "Allow for", so the line says nothing of grants.
func covers(c cardpkg.Card, call cardpkg.Call) string {
	v, ok := c.Cover(call)
	if !ok {
		return ""
	}
	v.Grant, v.NoGrant = nil, ""
	return oneLine(v.Text())
}
