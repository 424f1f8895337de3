package card_test

import (
	"testing"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/card"
)

// The card names the bot's own actors in words (card.ActorName): its ids
// must be the bot's, or a policy's decision would show as a person "policy".
func TestActorsAreTheBots(t *testing.T) {
	for id, want := range map[string]string{bot.PolicyActor: "the policy", bot.SystemActor: "Airlock", "": "someone"} {
		if got, ok := card.ActorName(id); !ok || got != want {
			t.Errorf("%q: %q, %v", id, got, ok)
		}
	}
	if _, ok := card.ActorName("U123"); ok {
		t.Error("a person named as one of Airlock's actors")
	}
}
