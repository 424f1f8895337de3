package sealed

import (
	"context"
	"errors"
	"testing"

	"github.com/airlockhq/airlock/confirm"
)

// A sealed record opens to its payload with the same credential; edited,
// moved under another key or kind, sealed with another credential, or
// never sealed, it is refused.
func TestSealOpen(t *testing.T) {
	s := New("slack", "xoxb-one")
	it := confirm.InboxItem{Platform: "slack", Key: "interaction:1", Kind: "interaction", Payload: []byte(`{"user":{"id":"UALICE"}}`)}
	sealed := s.Seal(it)
	if got, err := s.Open(sealed); err != nil || string(got) != string(it.Payload) {
		t.Fatalf("Open = %q, %v", got, err)
	}
	edited := sealed
	edited.Payload = []byte(string(sealed.Payload[:len(sealed.Payload)-3]) + `M"}}`)
	moved := sealed
	moved.Key = "interaction:2"
	kind := sealed
	kind.Kind = "event"
	for name, x := range map[string]struct {
		s  Sealer
		it confirm.InboxItem
	}{
		"edited":             {s, edited},
		"moved":              {s, moved},
		"another kind":       {s, kind},
		"never sealed":       {s, it},
		"another credential": {New("slack", "xoxb-two"), sealed},
		"another platform":   {New("discord", "xoxb-one"), sealed},
	} {
		if _, err := x.s.Open(x.it); !errors.Is(err, ErrForged) {
			t.Errorf("%s: Open = %v, want ErrForged", name, err)
		}
	}
}

// Unseal gives a replayed record back its payload; a forged one is
// refused and keeps what the database held.
func TestUnseal(t *testing.T) {
	s := New("discord", "bot-token")
	it := confirm.InboxItem{Platform: "discord", Key: "interaction:1", Kind: "interaction", Payload: []byte(`{"id":"1"}`)}
	sealed := s.Seal(it)
	if err := s.Unseal(&sealed); err != nil || string(sealed.Payload) != string(it.Payload) {
		t.Fatalf("Unseal = %v, payload %q", err, sealed.Payload)
	}
	forged := it
	if err := s.Unseal(&forged); !errors.Is(err, ErrForged) || string(forged.Payload) != string(it.Payload) {
		t.Fatalf("Unseal of an unsealed record = %v, payload %q", err, forged.Payload)
	}
}

// Replay works a sealed record with its kind's replayer, on the payload
// it sealed; a forged record, or a sealed one of a kind the adapter does
// not replay, is refused and nothing is worked.
func TestReplay(t *testing.T) {
	s := New("slack", "xoxb-one")
	var worked []string
	kinds := map[string]func(*confirm.InboxItem) error{
		"interaction": func(it *confirm.InboxItem) error { worked = append(worked, string(it.Payload)); return nil },
	}
	it := confirm.InboxItem{Platform: "slack", Key: "interaction:1", Kind: "interaction", Payload: []byte(`{"user":{"id":"UALICE"}}`)}
	if err := s.Replay(s.Seal(it), kinds); err != nil || len(worked) != 1 || worked[0] != string(it.Payload) {
		t.Fatalf("Replay = %v, worked %q", err, worked)
	}
	if err := s.Replay(it, kinds); !errors.Is(err, ErrForged) {
		t.Fatalf("an unsealed record: %v, want ErrForged", err)
	}
	other := it
	other.Kind = "event"
	if err := s.Replay(s.Seal(other), kinds); err == nil || errors.Is(err, ErrForged) {
		t.Fatalf("a sealed record of a kind not replayed: %v, want refused", err)
	}
	if len(worked) != 1 {
		t.Fatalf("worked %q after refusals", worked)
	}
}

type inbox struct{ got []confirm.InboxItem }

func (i *inbox) Record(_ context.Context, it confirm.InboxItem) (bool, error) {
	i.got = append(i.got, it)
	return len(i.got) == 1, nil
}

// Record stores the delivery sealed (a replay opens it to its payload)
// and hands the live path the delivery without its payload: the
// database keeps it, the queue of work does not.
func TestRecordKeepsThePayloadInTheDatabaseOnly(t *testing.T) {
	s := New("discord", "bot-token")
	in := &inbox{}
	payload := []byte(`{"id":"1","data":{"custom_id":"al:a:x"}}`)
	it, first, err := s.Record(context.Background(), in, confirm.InboxItem{Platform: "discord", Key: "interaction:1", Kind: "interaction", Payload: payload})
	if err != nil || !first {
		t.Fatalf("Record = %v, %v", first, err)
	}
	if it.Key != "interaction:1" || it.Platform != "discord" || it.Payload != nil {
		t.Fatalf("live delivery %+v, want its key and no payload", it)
	}
	if len(in.got) != 1 {
		t.Fatalf("%d recorded", len(in.got))
	}
	if got, err := s.Open(in.got[0]); err != nil || string(got) != string(payload) {
		t.Fatalf("the recorded delivery opens to %q, %v", got, err)
	}
}
