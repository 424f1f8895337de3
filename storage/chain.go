package storage

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
)

// The audit is a hash chain (docs/audit.md): each row's hash is
// SHA-256 over the previous row's hash (32 bytes; all zero before the
// first row) and the row's canonical bytes. audit_head holds the last
// chained row; every audit insert reads and updates it in the row's own
// transaction (on PostgreSQL under its row lock), so concurrent writers,
// replicas too, extend one chain.

// AuditGenesis is the previous hash of the first row of a chain.
const AuditGenesis = "0000000000000000000000000000000000000000000000000000000000000000"

// auditTimeLayout is how a row's time enters its canonical bytes: UTC,
// microseconds (what both databases store), fixed width.
const auditTimeLayout = "2006-01-02T15:04:05.000000Z"

// AuditRecord is an audit row with its place in the chain.
type AuditRecord struct {
	ID             int64     `json:"id"`
	At             time.Time `json:"at"`
	Kind           string    `json:"kind"`
	ConversationID int64     `json:"conversation_id"`
	BatchID        string    `json:"batch_id"`
	CallKey        string    `json:"call_key"`
	Tool           string    `json:"tool"`
	Actor          string    `json:"actor"`
	Detail         string    `json:"detail"`
	PrevHash       string    `json:"prev_hash"`
	Hash           string    `json:"hash"`
	// MAC is the row's MAC with the key of audit.signing_key (AuditMAC);
	// empty for a row written without the key.
	MAC string `json:"mac,omitempty"`
}

// AuditCanonical appends the row's canonical bytes to buf: its columns
// id, at, kind, conversation_id, batch_id, call_key, tool, actor, detail
// in that order, each as a 4-byte big-endian length then that many bytes;
// ids in decimal, at as auditTimeLayout in UTC, text as stored (UTF-8).
func AuditCanonical(buf []byte, r AuditRecord) []byte {
	field := func(s string) {
		buf = binary.BigEndian.AppendUint32(buf, uint32(len(s)))
		buf = append(buf, s...)
	}
	field(strconv.FormatInt(r.ID, 10))
	field(utc(r.At).Format(auditTimeLayout))
	field(r.Kind)
	field(strconv.FormatInt(r.ConversationID, 10))
	field(r.BatchID)
	field(r.CallKey)
	field(r.Tool)
	field(r.Actor)
	field(r.Detail)
	return buf
}

// AuditHash is the row's hash chained to prev (lowercase hex): SHA-256
// over prev's 32 bytes and the row's canonical bytes. A prev that is not
// 64 hex digits hashes as its text, so a forged one never matches.
func AuditHash(prev string, r AuditRecord) string {
	h := sha256.New()
	if b, err := hex.DecodeString(prev); err == nil && len(b) == sha256.Size {
		h.Write(b)
	} else {
		h.Write([]byte(prev))
	}
	h.Write(AuditCanonical(make([]byte, 0, 256), r))
	return hex.EncodeToString(h.Sum(nil))
}

// insertChained writes a new audit row chained to the head in ex's
// transaction and moves the head to it; it returns the row's id. With the
// audit key (WithAuditKey) the row carries its MAC, and a head Airlock
// did not write is not extended (foreignHead).
func (db *DB) insertChained(ctx context.Context, ex dbtx, r AuditRecord) (int64, error) {
	if db.driver == DriverPostgres && db.mac == nil {
		// The UPDATE locks the head row until the transaction ends (a
		// concurrent writer waits, then reads the head it left) and takes
		// the next id from the audit's own sequence under that lock, so ids
		// follow the chain and a writer that does not chain (an older
		// release during an upgrade) never takes the same id; the row is
		// hashed there in the same statement, with the canonical bytes after the
		// id computed here.
		rest := AuditCanonical(nil, r)
		rest = rest[4+len(strconv.FormatInt(r.ID, 10)):]
		var id int64
		err := db.get(ctx, ex, &id, db.q(auditInsertPostgres), rest, db.ts(r.At), r.Kind, r.ConversationID, r.BatchID, r.CallKey, r.Tool, r.Actor, r.Detail)
		return id, err
	}
	head, id, err := db.takeHead(ctx, ex)
	if err != nil {
		return 0, err
	}
	if db.mac != nil && !head.authentic(db.mac) {
		if head, err = db.foreignHead(ctx, ex, db.mac, head, id, r.At); err != nil {
			return 0, err
		}
		if id, err = db.nextID(ctx, ex, head.ID); err != nil {
			return 0, err
		}
	}
	r.ID, r.PrevHash = id, head.Hash
	r.Hash = AuditHash(r.PrevHash, r)
	if db.mac != nil {
		r.MAC = db.mac.Sum(r.ID, r.Hash)
	}
	return r.ID, db.appendRecord(ctx, ex, r, db.mac != nil)
}

// takeHead takes the chain's head to extend it, in ex's transaction, and
// the next row's id. On PostgreSQL the UPDATE locks the head row until the
// transaction ends (a concurrent writer waits, then reads the head it
// left: an UPDATE that waited evaluates its SET again on the row it then
// reads) and takes the id from the audit's own sequence under that lock,
// never below the head's, so ids follow the chain and a writer that does
// not chain (an older release) never takes the same id. SQLite's writes
// are serialised already; there the id is past every row's, so a row
// written outside Airlock past the head (which verify names) never makes
// Airlock's insert fail.
func (db *DB) takeHead(ctx context.Context, ex dbtx) (chainHead, int64, error) {
	var head struct {
		chainHead
		Next int64 `db:"next_id"`
	}
	q := `SELECT last_id AS prev_id, last_hash AS prev_hash, last_mac AS prev_mac,
		max(last_id, (SELECT COALESCE(MAX(id), 0) FROM audit)) + 1 AS next_id FROM audit_head WHERE one = 1`
	if db.driver == DriverPostgres {
		q = `UPDATE audit_head SET prev_id = last_id, prev_hash = last_hash, prev_mac = last_mac,
			last_id = GREATEST(nextval(pg_get_serial_sequence('audit', 'id')), last_id + 1)
		WHERE one = 1 RETURNING prev_id, prev_hash, prev_mac, last_id AS next_id`
	}
	if err := db.get(ctx, ex, &head, q); err != nil {
		return chainHead{}, 0, fmt.Errorf("%w: %w", ErrAuditHead, err)
	}
	return head.chainHead, head.Next, nil
}

// nextID is the id of a row after row after, the head being locked.
func (db *DB) nextID(ctx context.Context, ex dbtx, after int64) (int64, error) {
	if db.driver != DriverPostgres {
		return after + 1, nil
	}
	var id int64
	if err := db.get(ctx, ex, &id, `SELECT GREATEST(nextval(pg_get_serial_sequence('audit', 'id')), $1::bigint + 1)`, after); err != nil {
		return 0, fmt.Errorf("%w: next id: %w", ErrAuditHead, err)
	}
	return id, nil
}

// appendRecord writes r (id, hashes and MAC set) and moves the head to it;
// withMAC moves the head's MAC too (a store without the key leaves it).
func (db *DB) appendRecord(ctx context.Context, ex dbtx, r AuditRecord, withMAC bool) error {
	move, args := `UPDATE audit_head SET last_id = ?, last_hash = ? WHERE one = 1`, []any{r.ID, r.Hash}
	if withMAC {
		move, args = `UPDATE audit_head SET last_id = ?, last_hash = ?, last_mac = ? WHERE one = 1`, []any{r.ID, r.Hash, r.MAC}
	}
	if db.driver == DriverPostgres {
		// One round trip: the head is locked until the commit.
		_, err := db.exec(ctx, ex, db.q(`WITH i AS (INSERT INTO audit (id, at, kind, conversation_id, batch_id, call_key, tool, actor, detail, prev_hash, hash, mac)
			OVERRIDING SYSTEM VALUE VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)) `+move),
			append([]any{r.ID, db.ts(r.At), r.Kind, r.ConversationID, r.BatchID, r.CallKey, r.Tool, r.Actor, r.Detail, r.PrevHash, r.Hash, r.MAC}, args...)...)
		return err
	}
	if err := db.insertRecord(ctx, ex, r); err != nil {
		return err
	}
	_, err := db.exec(ctx, ex, db.q(move), args...)
	return err
}

// auditInsertPostgres is AuditHash in SQL: SHA-256 over the previous hash's
// bytes, the new id's field (length, then decimal digits) and the rest of
// the canonical bytes ($1). The id is the sequence's next value, taken
// with the head's lock held (an UPDATE that waited for the lock evaluates
// its sub-select again on the head it then reads), never below the head's.
const auditInsertPostgres = `WITH h AS (
		UPDATE audit_head SET (prev_hash, last_id, last_hash) = (
			SELECT last_hash, n, encode(sha256(decode(last_hash, 'hex')
				|| int4send(octet_length(n::text)) || convert_to(n::text, 'UTF8') || ?::bytea), 'hex')
			FROM (SELECT GREATEST(nextval(pg_get_serial_sequence('audit', 'id')), last_id + 1) AS n) s)
		WHERE one = 1 RETURNING last_id, prev_hash, last_hash)
	INSERT INTO audit (id, at, kind, conversation_id, batch_id, call_key, tool, actor, detail, prev_hash, hash) OVERRIDING SYSTEM VALUE
	SELECT last_id, ?, ?, ?, ?, ?, ?, ?, ?, prev_hash, last_hash FROM h
	RETURNING id`

// flushAudits writes the audit events a PostgreSQL transaction held
// (insertAudit), in order, just before its commit: the chain head's row
// lock then lasts from those statements to the commit, not from the first
// audit of a transaction through the rest of its work. Nothing reads the
// audit inside the transaction that writes it.
func (db *DB) flushAudits(ctx context.Context, tx *txn) error {
	for _, e := range tx.audits {
		if err := db.writeAudit(ctx, tx, e); err != nil {
			return err
		}
	}
	return nil
}

// chainPage is how many rows the chain's readers (and chainPreChain)
// hold at once.
const chainPage = 1000

const auditRecordColumns = `id, at, kind, conversation_id, batch_id, call_key, tool, actor, detail, prev_hash, hash, mac`

type auditRecordRow struct {
	auditRow
	PrevHash string `db:"prev_hash"`
	Hash     string `db:"hash"`
	MAC      string `db:"mac"`
}

func (r auditRecordRow) record() AuditRecord {
	return AuditRecord{ID: r.ID, At: r.At.t, Kind: r.Kind, ConversationID: r.ConversationID, BatchID: r.BatchID,
		CallKey: r.CallKey, Tool: r.Tool, Actor: r.Actor, Detail: r.Detail, PrevHash: r.PrevHash, Hash: r.Hash, MAC: r.MAC}
}

// auditChainMigration is the migration that added the chain (014): its
// transaction chains the rows written before it (chainPreChain).
const auditChainMigration = 14

// preChainColumns are the audit's columns as migration 014 left them.
const preChainColumns = `id, at, kind, conversation_id, batch_id, call_key, tool, actor, detail, prev_hash, hash`

// chainPreChain chains the rows written before the chain existed, in id
// order from the head, a page at a time, in tx: migration 014's
// transaction, which leaves them with empty hashes. Nothing else chains
// a row afterwards.
func (db *DB) chainPreChain(ctx context.Context, tx dbtx) error {
	var head struct {
		ID   int64  `db:"last_id"`
		Hash string `db:"last_hash"`
	}
	if err := db.get(ctx, tx, &head, `SELECT last_id, last_hash FROM audit_head WHERE one = 1`); err != nil {
		return fmt.Errorf("chain audit: head: %w", err)
	}
	for {
		var rows []auditRecordRow
		if err := db.sel(ctx, tx, &rows, db.q(`SELECT `+preChainColumns+` FROM audit WHERE id > ? ORDER BY id LIMIT `+strconv.Itoa(chainPage)), head.ID); err != nil {
			return fmt.Errorf("chain audit: load: %w", err)
		}
		for _, row := range rows {
			r := row.record()
			r.PrevHash = head.Hash
			r.Hash = AuditHash(r.PrevHash, r)
			if _, err := db.exec(ctx, tx, db.q(`UPDATE audit SET prev_hash = ?, hash = ? WHERE id = ?`), r.PrevHash, r.Hash, r.ID); err != nil {
				return fmt.Errorf("chain audit: row %d: %w", r.ID, err)
			}
			head.ID, head.Hash = r.ID, r.Hash
		}
		if len(rows) < chainPage {
			break
		}
	}
	if _, err := db.exec(ctx, tx, db.q(`UPDATE audit_head SET last_id = ?, last_hash = ? WHERE one = 1`), head.ID, head.Hash); err != nil {
		return fmt.Errorf("chain audit: move head: %w", err)
	}
	return nil
}

// AuditRecords calls fn with each audit row from after id after, in id
// order, reading a page of rows at a time (memory is bounded whatever the
// table's size); fn returning an error stops it with that error.
func (db *DB) AuditRecords(ctx context.Context, after int64, f AuditRecordFilter, fn func(AuditRecord) error) error {
	return db.auditRecordsOn(ctx, db.reader(), after, f, fn)
}

// auditRecordsOn is AuditRecords reading through rd (a read transaction's
// snapshot, or the read pool).
func (db *DB) auditRecordsOn(ctx context.Context, rd sqlx.QueryerContext, after int64, f AuditRecordFilter, fn func(AuditRecord) error) error {
	where, args := db.auditWhere(f)
	for {
		var rows []auditRecordRow
		q := `SELECT ` + auditRecordColumns + ` FROM audit WHERE id > ?` + where + ` ORDER BY id LIMIT ` + strconv.Itoa(chainPage)
		if err := db.sel(ctx, rd, &rows, db.q(q), append([]any{after}, args...)...); err != nil {
			return fmt.Errorf("read audit: %w", err)
		}
		for _, row := range rows {
			if err := fn(row.record()); err != nil {
				return err
			}
			after = row.ID
		}
		if len(rows) < chainPage {
			return nil
		}
	}
}

// AuditRecordFilter selects rows for AuditRecords; zero fields select
// every row.
type AuditRecordFilter struct {
	Since, Until   time.Time // at >= Since, at < Until
	ConversationID int64
	Tool, Actor    string
	// ThreadPrefixes, when set, keep the rows of conversations whose thread
	// begins with one of them (a gateway client's sessions:
	// gateway.ClientThreads).
	ThreadPrefixes []string
}

func (db *DB) auditWhere(f AuditRecordFilter) (string, []any) {
	var where string
	var args []any
	add := func(cond string, arg any) {
		where += " AND " + cond
		args = append(args, arg)
	}
	if !f.Since.IsZero() {
		add("at >= ?", db.ts(f.Since))
	}
	if !f.Until.IsZero() {
		add("at < ?", db.ts(f.Until))
	}
	if f.ConversationID != 0 {
		add("conversation_id = ?", f.ConversationID)
	}
	if f.Tool != "" {
		add("tool = ?", f.Tool)
	}
	if f.Actor != "" {
		add("actor = ?", f.Actor)
	}
	if len(f.ThreadPrefixes) > 0 {
		var or []string
		for _, p := range f.ThreadPrefixes {
			or = append(or, "substr(thread, 1, ?) = ?")
			args = append(args, len(p), p)
		}
		where += " AND conversation_id IN (SELECT id FROM conversations WHERE " + strings.Join(or, " OR ") + ")"
	}
	return where, args
}

// AuditHead is the chain's head as stored: the last chained row's id and
// hash (0 and AuditGenesis before any row).
func (db *DB) AuditHead(ctx context.Context) (id int64, hash string, err error) {
	return db.auditHeadOn(ctx, db.reader())
}

func (db *DB) auditHeadOn(ctx context.Context, rd sqlx.QueryerContext) (id int64, hash string, err error) {
	var head struct {
		ID   int64  `db:"last_id"`
		Hash string `db:"last_hash"`
	}
	if err := db.get(ctx, rd, &head, `SELECT last_id, last_hash FROM audit_head WHERE one = 1`); err != nil {
		return 0, "", fmt.Errorf("audit head: %w", err)
	}
	return head.ID, head.Hash, nil
}

// ErrAuditChain is wrapped by every AuditBreak.
var ErrAuditChain = errors.New("audit chain broken")

// RecentAudit lists the newest audit rows the filter selects, newest
// first, at most limit (the web console's audit page).
func (db *DB) RecentAudit(ctx context.Context, f AuditRecordFilter, limit int) ([]AuditRecord, error) {
	where, args := db.auditWhere(f)
	var rows []auditRecordRow
	q := `SELECT ` + auditRecordColumns + ` FROM audit WHERE id > 0` + where + ` ORDER BY id DESC LIMIT ` + strconv.Itoa(limit)
	if err := db.sel(ctx, db.reader(), &rows, db.q(q), args...); err != nil {
		return nil, fmt.Errorf("recent audit: %w", err)
	}
	out := make([]AuditRecord, len(rows))
	for i, r := range rows {
		out[i] = r.record()
	}
	return out, nil
}
