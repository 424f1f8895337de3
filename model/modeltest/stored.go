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
