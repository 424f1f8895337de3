package discord

import (
	"github.com/bwmarrin/discordgo"

	"github.com/airlockhq/airlock/card"
)

// coverLabel names the field that says what a yes covers.
const coverLabel = card.CoversLabel

// coverField is the last field of a waiting call's embed, just above the
// buttons: what each does in this card's case (card.Card.Cover), people
// as (non-pinging) mentions, a grant's end as a Discord timestamp (each
// reader's time zone), the tool's name inert. nil for a call nobody
// waits on.
func coverField(cd card.Card, c card.Call, budget int) *discordgo.MessageEmbedField {
	v, ok := cd.Cover(c)
	if !ok {
		return nil
	}
	return &discordgo.MessageEmbedField{Name: coverLabel, Value: truncateMarkup(parts(v.Line().Parts), clamp(budget/4, 100, maxFieldValue))}
}

// coverRunes is how much of the embed's budget the field takes.
func coverRunes(f *discordgo.MessageEmbedField) int {
	if f == nil {
		return 0
	}
	return runes(f.Name) + runes(f.Value)
}
