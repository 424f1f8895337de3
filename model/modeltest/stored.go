package modeltest

import (
	"encoding/json"
	"testing"

	"github.com/airlockhq/airlock/model"
)

// StoredCopy returns m as it comes back from storage: marshalled to JSON
// and read back, as the bot keeps a conversation between turns.
func StoredCopy(t testing.TB, m model.Message) model.Message {
	t.Helper()
	stored, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var loaded model.Message
	if err := json.Unmarshal(stored, &loaded); err != nil {
		t.Fatal(err)
	}
	return loaded
}

// Generate asks p for a reply to req, failing t on an error.
func Generate(t testing.TB, p model.Provider, req model.Request) model.Message {
	t.Helper()
	msg, err := p.Generate(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

// DecodeJSON is s decoded from JSON into plain values, failing t when s
// is not JSON; two texts meaning the same JSON decode equal.
func DecodeJSON(t testing.TB, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return v
}
