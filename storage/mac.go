package storage

import (
	"context"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/airlockhq/airlock/confirm"
)

// Row MACs (migration 021; docs/audit.md). The chain alone shows rows
// changed after the fact, but anyone who can write to the database can
// compute a hash: a row appended with a correct hash, and the head moved
// to it, is a valid chain. So with audit.signing_key set each row also
// carries a MAC that only a holder of the key can compute:
//
//	mac = hex(HMAC-SHA256(K, "<id>\n<hash>"))
//	K   = HMAC-SHA256(the key's 32-byte Ed25519 seed, "airlock-audit-row-mac-v1")
//
// written in the row's own transaction, and audit_head keeps the head
// row's (last_mac; a trigger refuses to empty it once set). The hash
// covers every row before, so a valid MAC vouches for the whole chain up
// to its row. Before Airlock extends the chain it checks the head's MAC:
// a head it did not write (a bad MAC) is not extended. Airlock records a
// row of kind audit_foreign_row, chained to the last row that carries a
// valid MAC, then its own row after it; the rows in between stay out of
// the chain (verify names them), are never covered by a checkpoint, and
// the alarm goes to the log, airlock_audit_alarms_total and the
// audit_foreign_row webhook event. Recording never stops.

// AuditMAC is the row-MAC key derived from audit.signing_key.
type AuditMAC struct{ key []byte }

// NewAuditMAC derives the row-MAC key from the signing key; nil for no key.
func NewAuditMAC(key ed25519.PrivateKey) *AuditMAC {
	if len(key) != ed25519.PrivateKeySize {
		return nil
	}
	h := hmac.New(sha256.New, key.Seed())
	h.Write([]byte("airlock-audit-row-mac-v1"))
	return &AuditMAC{key: h.Sum(nil)}
}

// Sum is the MAC of row id with hash.
func (m *AuditMAC) Sum(id int64, hash string) string {
	h := hmac.New(sha256.New, m.key)
	h.Write([]byte(strconv.FormatInt(id, 10) + "\n" + hash))
	return hex.EncodeToString(h.Sum(nil))
}

// Valid reports whether mac is row id's MAC with hash.
func (m *AuditMAC) Valid(id int64, hash, mac string) bool {
	got, err := hex.DecodeString(mac)
	if err != nil {
		return false
	}
	want, _ := hex.DecodeString(m.Sum(id, hash))
	return hmac.Equal(got, want)
}

// WithAuditKey makes the store MAC every audit row it writes with the key
// derived from audit.signing_key, and refuse to extend the chain from a
// head it did not write (see AuditMAC). Every process writing to the
// database needs it once one has it: a row written without it is, to
// the others, a row written outside Airlock.
func WithAuditKey(key ed25519.PrivateKey) Option {
	return func(db *DB) { db.mac = NewAuditMAC(key) }
}

// AuditAlarm is what OnAuditAlarm's func is told: the chain's head was a
// row Airlock did not write, and where Airlock chained its next row.
type AuditAlarm struct {
	Row       int64  // the head row found (not written by Airlock)
	Hash      string // its hash
	ChainedTo int64  // the last row with a valid MAC, chained to instead (0: none; the head was kept)
	AlarmRow  int64  // the audit_foreign_row row recording it
	Why       string
}

// OnAuditAlarm sets fn to be called (in the transaction that records it)
// whenever the store finds the chain's head at a row it did not write:
// the process logs it and counts it. Call it once at start.
func (db *DB) OnAuditAlarm(fn func(AuditAlarm)) { db.onAlarm.Store(&fn) }

func (db *DB) alarm(a AuditAlarm) {
	if fn := db.onAlarm.Load(); fn != nil {
		(*fn)(a)
	}
}

// auditAlarmDetail is the detail of an audit_foreign_row row.
type auditAlarmDetail struct {
	Row       int64  `json:"row"`
	Hash      string `json:"hash"`
	ChainedTo int64  `json:"chained_to"`
	Why       string `json:"why"`
}

// chainHead is the chain's head as Airlock takes it to extend it.
type chainHead struct {
	ID   int64  `db:"prev_id"`
	Hash string `db:"prev_hash"`
	MAC  string `db:"prev_mac"`
}

// authentic reports whether Airlock may extend the chain from h with mac:
// the head's MAC is valid, or no row was ever written with a MAC (the
// rows before the key or before migration 021).
func (h chainHead) authentic(mac *AuditMAC) bool {
	return h.MAC == "" || mac.Valid(h.ID, h.Hash, h.MAC)
}

// lastAuthentic is the row with the highest id at or below below whose
// MAC is valid: the last row Airlock wrote. ok false when there is none.
func (db *DB) lastAuthentic(ctx context.Context, ex dbtx, mac *AuditMAC, below int64) (chainHead, bool, error) {
	for {
		var rows []struct {
			ID   int64  `db:"id"`
			Hash string `db:"hash"`
			MAC  string `db:"mac"`
		}
		if err := db.sel(ctx, ex, &rows, db.q(`SELECT id, hash, mac FROM audit WHERE id <= ? ORDER BY id DESC LIMIT `+strconv.Itoa(chainPage)), below); err != nil {
			return chainHead{}, false, fmt.Errorf("last authentic row: %w", err)
		}
		for _, r := range rows {
			if r.MAC != "" && mac.Valid(r.ID, r.Hash, r.MAC) {
				return chainHead{ID: r.ID, Hash: r.Hash, MAC: r.MAC}, true, nil
			}
			below = r.ID - 1
		}
		if len(rows) < chainPage {
			return chainHead{}, false, nil
		}
	}
}

// foreignHead handles a head Airlock did not write, in ex's transaction,
// the head locked (takeHead): it finds the last row with a valid MAC and
// appends the audit_foreign_row row chained to it (with id id), queues its
// webhook event and raises the alarm. It returns the alarm row, the head
// to chain to.
func (db *DB) foreignHead(ctx context.Context, ex dbtx, mac *AuditMAC, head chainHead, id int64, at time.Time) (chainHead, error) {
	to, ok, err := db.lastAuthentic(ctx, ex, mac, id-1)
	if err != nil {
		return chainHead{}, err
	}
	why := fmt.Sprintf("the chain's head was row %d, which Airlock did not write (its MAC does not verify with audit.signing_key); "+
		"Airlock chained this row to row %d, the last one it wrote, so the rows after that stay out of the chain", head.ID, to.ID)
	chainedTo := to.ID
	if !ok {
		// No row carries a valid MAC: nothing to chain to but the head.
		to, chainedTo = head, 0
		why = fmt.Sprintf("the chain's head was row %d, whose MAC does not verify with audit.signing_key, and no row carries a valid MAC: "+
			"Airlock chained this row to it", head.ID)
	}
	detail, _ := json.Marshal(auditAlarmDetail{Row: head.ID, Hash: head.Hash, ChainedTo: chainedTo, Why: why})
	r := AuditRecord{ID: id, At: utc(at), Kind: string(confirm.AuditForeignRow), Actor: auditSystemActor, Detail: string(detail), PrevHash: to.Hash}
	r.Hash = AuditHash(r.PrevHash, r)
	r.MAC = mac.Sum(r.ID, r.Hash)
	if err := db.appendRecord(ctx, ex, r, true); err != nil {
		return chainHead{}, fmt.Errorf("audit alarm row: %w", err)
	}
	if targets := db.webhookTargets(); len(targets) > 0 {
		e := confirm.AuditEvent{ID: r.ID, At: r.At, Kind: confirm.AuditForeignRow, Actor: auditSystemActor, Detail: r.Detail}
		if err := db.enqueue(ctx, ex, e, targets); err != nil {
			return chainHead{}, fmt.Errorf("outbox of audit %s: %w", e.Kind, err)
		}
	}
	db.alarm(AuditAlarm{Row: head.ID, Hash: head.Hash, ChainedTo: chainedTo, AlarmRow: r.ID, Why: why})
	return chainHead{ID: r.ID, Hash: r.Hash, MAC: r.MAC}, nil
}

// repairHead is foreignHead on its own, for the checkpoint job: with the
// head locked, a head Airlock did not write gets its audit_foreign_row row
// (and the head moves to it); an authentic one is left as it was. It
// returns the head.
func (db *DB) repairHead(ctx context.Context, tx *txn, mac *AuditMAC) (chainHead, error) {
	head, id, err := db.takeHead(ctx, tx)
	if err != nil {
		return chainHead{}, err
	}
	if !head.authentic(mac) {
		return db.foreignHead(ctx, tx, mac, head, id, tx.now)
	}
	if db.driver == DriverPostgres { // takeHead moved last_id on
		if _, err := db.exec(ctx, tx, `UPDATE audit_head SET last_id = $1 WHERE one = 1`, head.ID); err != nil {
			return chainHead{}, fmt.Errorf("%w: %w", ErrAuditHead, err)
		}
	}
	return head, nil
}

// insertRecord writes r as it is (id, hashes and MAC set).
func (db *DB) insertRecord(ctx context.Context, ex dbtx, r AuditRecord) error {
	q := `INSERT INTO audit (id, at, kind, conversation_id, batch_id, call_key, tool, actor, detail, prev_hash, hash, mac)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	if db.driver == DriverPostgres {
		q = `INSERT INTO audit (id, at, kind, conversation_id, batch_id, call_key, tool, actor, detail, prev_hash, hash, mac) OVERRIDING SYSTEM VALUE
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	}
	_, err := db.exec(ctx, ex, db.q(q), r.ID, db.ts(r.At), r.Kind, r.ConversationID, r.BatchID, r.CallKey, r.Tool, r.Actor, r.Detail, r.PrevHash, r.Hash, r.MAC)
	return err
}

// ErrAuditHead wraps what went wrong reading or moving the chain's head.
var ErrAuditHead = errors.New("audit chain head")
