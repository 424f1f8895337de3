// Package sealed authenticates what a platform adapter records in the
// inbox: a delivery is worked again from the database after a kill, and
// the database must not be able to hand Airlock a click or a mention no
// platform sent. Each record carries a MAC keyed from the adapter's
// platform credential, which the database never holds; a record whose
// MAC does not verify (inserted or edited by hand) is refused, never
// worked.
package sealed

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/airlockhq/airlock/confirm"
)

// ErrForged: a record's MAC does not verify with this process's key. It
// was not written by an Airlock holding the platform's credential (or
// the credential changed since). Classify with errors.Is.
var ErrForged = errors.New("the inbox record's seal does not verify: it was not recorded by Airlock with this platform credential")

// prefix begins a sealed payload; the MAC (hex) and a newline follow.
const prefix = "sealed1 "

// Sealer seals and opens one platform's inbox records.
type Sealer struct {
	platform string
	key      []byte
}

// New derives the sealing key from a platform's credential (a bot
// token): every replica holding it seals and opens alike.
func New(platform, credential string) Sealer {
	m := hmac.New(sha256.New, []byte("airlock inbox seal v1"))
	field(m, platform)
	field(m, credential)
	return Sealer{platform: platform, key: m.Sum(nil)}
}

// Seal returns it with its payload sealed: bound to its platform, key and
// kind, so a payload cannot be moved under another record either.
func (s Sealer) Seal(it confirm.InboxItem) confirm.InboxItem {
	mac := s.mac(it.Platform, it.Key, it.Kind, it.Payload)
	out := make([]byte, 0, len(prefix)+len(mac)+1+len(it.Payload))
	out = append(out, prefix...)
	out = append(out, mac...)
	out = append(out, '\n')
	it.Payload = append(out, it.Payload...)
	return it
}

// Open returns the payload of a sealed record, or ErrForged.
func (s Sealer) Open(it confirm.InboxItem) ([]byte, error) {
	rest, ok := bytes.CutPrefix(it.Payload, []byte(prefix))
	if !ok {
		return nil, ErrForged
	}
	mac, payload, ok := bytes.Cut(rest, []byte{'\n'})
	if !ok || !hmac.Equal(mac, s.mac(it.Platform, it.Key, it.Kind, payload)) {
		return nil, ErrForged
	}
	return payload, nil
}

// Unseal replaces the payload of a sealed record with what was sealed,
// or returns ErrForged and leaves it as it is. An adapter replaying its
// inbox unseals each record first: only what it recorded is worked, and
// a record the database holds that no Airlock with the credential sealed
// (inserted by hand) is refused.
func (s Sealer) Unseal(it *confirm.InboxItem) error {
	payload, err := s.Open(*it)
	if err != nil {
		return err
	}
	it.Payload = payload
	return nil
}

// Replay unseals it and works it with the replayer of its kind, one for
// each kind the adapter records: a forged record (ErrForged) or one of a
// kind the adapter never records is refused, and nothing is worked. Its
// errors name the platform and wrap the cause.
func (s Sealer) Replay(it confirm.InboxItem, kinds map[string]func(*confirm.InboxItem) error) error {
	if err := s.Unseal(&it); err != nil {
		return fmt.Errorf("%s: %w", s.platform, err)
	}
	replay, ok := kinds[it.Kind]
	if !ok {
		return fmt.Errorf("%s: a delivery of unknown kind %q", s.platform, it.Kind)
	}
	if err := replay(&it); err != nil {
		return fmt.Errorf("%s: %w", s.platform, err)
	}
	return nil
}

// Recorder is the inbox a delivery is recorded in (the bot's Record).
type Recorder interface {
	Record(ctx context.Context, it confirm.InboxItem) (bool, error)
}

// RecordTimeout bounds the inbox's insert: the acknowledgement it holds
// back must reach the platform within 3 seconds.
const RecordTimeout = 2 * time.Second

// Record seals it and records it in the inbox, within RecordTimeout,
// before the platform's delivery is acknowledged. It returns the
// delivery as the live path keeps it, and whether it was recorded now
// (false: recorded already, a platform's retry or another replica's). The
// delivery returned holds no payload: the payload is the database's now,
// the live path has it parsed and a replay reads it back, so a delivery
// waiting for a worker keeps only its key (a burst of clicks acknowledged
// faster than they are worked holds no copy of each: the peak-memory
// floor needs it, BENCHMARKS.md, eighteenth round). An error: it was
// not recorded; do not acknowledge it as taken.
func (s Sealer) Record(ctx context.Context, inbox Recorder, it confirm.InboxItem) (*confirm.InboxItem, bool, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), RecordTimeout)
	defer cancel()
	first, err := inbox.Record(ctx, s.Seal(it))
	if err != nil {
		return nil, false, fmt.Errorf("record the delivery: %w", err)
	}
	it.Payload = nil
	return &it, first, nil
}

func (s Sealer) mac(platform, key, kind string, payload []byte) []byte {
	m := hmac.New(sha256.New, s.key)
	field(m, platform)
	field(m, key)
	field(m, kind)
	field(m, string(payload))
	sum := m.Sum(nil)
	out := make([]byte, hex.EncodedLen(len(sum)))
	hex.Encode(out, sum)
	return out
}

// field writes s with its length first, so fields never run together.
func field(w interface{ Write([]byte) (int, error) }, s string) {
	_, _ = w.Write(binary.BigEndian.AppendUint32(nil, uint32(len(s))))
	_, _ = w.Write([]byte(s))
}
