package storage

import (
	"context"
	"crypto/ed25519"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// AuditBreak is where a chain stops verifying: the first row that was
// edited, deleted, inserted or reordered. It wraps ErrAuditChain.
type AuditBreak struct {
	ID     int64  // the row named
	What   string // edited, deleted, inserted, reordered, unchained, truncated
	Detail string
}

func (b *AuditBreak) Error() string {
	return fmt.Sprintf("audit row %d %s: %s", b.ID, b.What, b.Detail)
}

func (b *AuditBreak) Unwrap() error { return ErrAuditChain }

// ChainIndex answers the questions a verifier asks once a row breaks the
// chain, to say how it broke: which row has a hash, and which row follows
// an id.
type ChainIndex interface {
	ByHash(ctx context.Context, hash string) (id int64, ok bool, err error)
	After(ctx context.Context, id int64) (next int64, ok bool, err error)
}

// ChainVerifier checks rows one at a time, in id order, holding only the
// last row's id and hash.
type ChainVerifier struct {
	index  ChainIndex
	prev   string
	prevID int64
	rows   int64

	anchor     *AuditCheckpoint // see Anchor
	anchorHash string           // the anchor's row's hash, once met

	mac    *AuditMAC // see CheckMACs
	macked int64     // rows with a valid MAC
	bare   int64     // rows before the first with a MAC, which carry none
}

// CheckMACs makes the verifier check each row's MAC with mac: from the
// first row that carries a valid one on, every row must (the rows before
// are those written before migration 021 or before the key was set).
func (v *ChainVerifier) CheckMACs(mac *AuditMAC) { v.mac = mac }

// MACs are how many rows carry a valid MAC, and how many before the
// first of them carry none.
func (v *ChainVerifier) MACs() (valid, bare int64) { return v.macked, v.bare }

// NewChainVerifier verifies a chain whose first row follows start
// (AuditGenesis for a chain from its beginning).
func NewChainVerifier(start string, index ChainIndex) *ChainVerifier {
	return &ChainVerifier{index: index, prev: start}
}

// startAfter makes the chain begin after the start checkpoint's row (its
// first row chains to it); only before the first row.
// An anchor at or before that row was pruned with it: the start's row is
// checked against it, an earlier one has nothing left to check.
func (v *ChainVerifier) startAfter(c AuditCheckpoint) {
	v.prev, v.prevID = c.Hash, c.ID
	if a := v.anchor; a != nil && a.ID < c.ID {
		v.anchor = nil
	} else if a != nil && a.ID == c.ID {
		v.anchorHash = c.Hash
	}
}

// Rows is how many rows verified; Head the last one's id and hash.
func (v *ChainVerifier) Rows() int64 { return v.rows }

func (v *ChainVerifier) Head() (int64, string) { return v.prevID, v.prev }

// Add checks the next row: nil when it extends the chain, an *AuditBreak
// naming the first bad row, or the index's error.
func (v *ChainVerifier) Add(ctx context.Context, r AuditRecord) error {
	if v.rows > 0 && r.ID <= v.prevID {
		return &AuditBreak{ID: r.ID, What: "reordered", Detail: fmt.Sprintf("it comes after row %d", v.prevID)}
	}
	if r.PrevHash != v.prev {
		if b, err := v.broken(ctx, r); b != nil || err != nil {
			if err != nil {
				return err
			}
			return b
		}
	}
	if AuditHash(r.PrevHash, r) != r.Hash {
		return &AuditBreak{ID: r.ID, What: "edited", Detail: "its contents do not match its hash"}
	}
	if v.mac != nil {
		switch {
		case r.MAC != "" && v.mac.Valid(r.ID, r.Hash, r.MAC):
			v.macked++
		case r.MAC != "":
			return &AuditBreak{ID: r.ID, What: "unauthenticated", Detail: "its MAC does not verify with audit.signing_key: it was written outside Airlock (or under another key)"}
		case v.macked > 0:
			return &AuditBreak{ID: r.ID, What: "unauthenticated", Detail: "it carries no MAC though rows before it do: it was written outside Airlock, " +
				"or by a process without audit.signing_key (an older release, a replica without the key)"}
		default:
			v.bare++
		}
	}
	v.prev, v.prevID = r.Hash, r.ID
	v.rows++
	if v.anchor != nil && r.ID == v.anchor.ID {
		v.anchorHash = r.Hash
	}
	return nil
}

// broken says how r, whose previous hash is not the last row's, broke the
// chain.
func (v *ChainVerifier) broken(ctx context.Context, r AuditRecord) (*AuditBreak, error) {
	if r.PrevHash == "" && r.Hash == "" {
		return &AuditBreak{ID: r.ID, What: "unchained", Detail: "it was inserted outside the chain (no hashes)"}, nil
	}
	m, ok, err := v.index.ByHash(ctx, r.PrevHash)
	if err != nil {
		return nil, fmt.Errorf("verify audit: %w", err)
	}
	switch {
	case ok && m > r.ID:
		return &AuditBreak{ID: r.ID, What: "reordered", Detail: fmt.Sprintf("it chains to row %d, which comes after it", m)}, nil
	case ok && m == r.ID:
		return &AuditBreak{ID: r.ID, What: "edited", Detail: "it chains to itself"}, nil
	case ok:
		// Rows between m and r were inserted: the first is the one after m.
		first, found, err := v.index.After(ctx, m)
		if err != nil {
			return nil, fmt.Errorf("verify audit: %w", err)
		}
		if !found {
			first = r.ID
		}
		return &AuditBreak{ID: first, What: "inserted", Detail: fmt.Sprintf("row %d chains to row %d, before it", r.ID, m)}, nil
	}
	// The row r chains to is not in the table: name the missing row (ids
	// follow the chain; on PostgreSQL an id can also be skipped, so the
	// detail gives the range).
	if v.rows == 0 && v.prev == AuditGenesis {
		if r.ID <= 1 {
			return &AuditBreak{ID: r.ID, What: "edited", Detail: "it is the first row but chains to another row"}, nil
		}
		return &AuditBreak{ID: r.ID - 1, What: "deleted", Detail: fmt.Sprintf("rows before row %d were deleted: it is the first row left, it chains to a row that is missing, and no stored start checkpoint names that row", r.ID)}, nil
	}
	if r.ID == v.prevID+1 {
		return &AuditBreak{ID: v.prevID, What: "edited", Detail: fmt.Sprintf("row %d, the next row, chains to another hash: row %d was rewritten, hash and all", r.ID, v.prevID)}, nil
	}
	missing := fmt.Sprintf("row %d", v.prevID+1)
	if r.ID > v.prevID+2 {
		missing = fmt.Sprintf("rows %d to %d", v.prevID+1, r.ID-1)
	}
	return &AuditBreak{ID: v.prevID + 1, What: "deleted", Detail: fmt.Sprintf("%s (after row %d) deleted: row %d chains to a row that is missing, or row %d was rewritten", missing, v.prevID, r.ID, v.prevID)}, nil
}

// dbChainIndex looks rows up in the database through rd (only once a row
// broke the chain; the hash lookup reads the whole table).
type dbChainIndex struct {
	db *DB
	rd sqlx.QueryerContext
}

func (x dbChainIndex) ByHash(ctx context.Context, hash string) (int64, bool, error) {
	var id int64
	err := x.db.get(ctx, x.rd, &id, x.db.q(`SELECT id FROM audit WHERE hash = ? ORDER BY id LIMIT 1`), hash)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return id, err == nil, err
}

func (x dbChainIndex) After(ctx context.Context, after int64) (int64, bool, error) {
	var id int64
	err := x.db.get(ctx, x.rd, &id, x.db.q(`SELECT id FROM audit WHERE id > ? ORDER BY id LIMIT 1`), after)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return id, err == nil, err
}

// AuditVerification is a chain that verified: its rows and its head.
type AuditVerification struct {
	Rows     int64
	HeadID   int64
	HeadHash string
	// Start is the start checkpoint the chain begins after (retention
	// pruned the rows up to it); zero for a chain from its beginning.
	Start AuditCheckpoint
	// Checkpoints is how many stored checkpoints were checked against the
	// chain (with a public key only).
	Checkpoints int
	// MACChecked: every row's MAC was checked (VerifyOptions.MAC); MACRows
	// carry a valid one, BareRows (all before the first of those) none.
	MACChecked        bool
	MACRows, BareRows int64
	// Stored is how many checkpoints the database holds, StoredStarts of
	// them start checkpoints: without a public key none of them was
	// checked (airlock audit verify says so, and fails).
	Stored, StoredStarts int
}

// VerifyOptions are what VerifyAuditWith checks besides the chain.
type VerifyOptions struct {
	// Anchors are checkpoints held outside Airlock (verify -checkpoint):
	// the chain must still hold their rows, with their hashes.
	Anchors []AuditCheckpoint
	// MAC, when set, checks every row's MAC (ChainVerifier.CheckMACs):
	// airlock audit verify takes it from the config's audit.signing_key.
	MAC *AuditMAC
	// PublicKey, when set, checks every stored checkpoint: its signature,
	// and that the chain holds its row with its hash (a checkpoint past
	// the chain's end names a truncated tail). The start checkpoint of a
	// pruned chain is then checked too; without the key it is taken as
	// stored.
	PublicKey ed25519.PublicKey
}

// VerifyAudit is VerifyAuditWith the anchors and no public key.
func (db *DB) VerifyAudit(ctx context.Context, anchors ...AuditCheckpoint) (AuditVerification, error) {
	return db.VerifyAuditWith(ctx, VerifyOptions{Anchors: anchors})
}

// VerifyAuditWith walks the whole chain in id order and checks it against
// the head row: an *AuditBreak (errors.Is ErrAuditChain) names the first row
// that was edited, deleted, inserted or reordered; rows deleted from the
// tail show as the head naming a row that is gone. A chain whose first row
// chains to a stored start checkpoint's row begins there (retention pruned
// the rows before); without one, its first row is named: rows before it
// were deleted.
//
// It reads one snapshot of the database in a read-only transaction and
// writes nothing.
func (db *DB) VerifyAuditWith(ctx context.Context, o VerifyOptions) (res AuditVerification, err error) {
	err = db.readTx(ctx, func(tx dbtx) error {
		res, err = db.verifyAudit(ctx, tx, o)
		return err
	})
	return res, err
}

func (db *DB) verifyAudit(ctx context.Context, rd sqlx.QueryerContext, o VerifyOptions) (AuditVerification, error) {
	all, err := db.auditCheckpointsOn(ctx, rd)
	if err != nil {
		return AuditVerification{}, err
	}
	starts := map[string]AuditCheckpoint{} // by hash
	var stored []AuditCheckpoint
	var res AuditVerification
	res.Stored = len(all)
	for _, c := range all {
		if c.Start {
			res.StoredStarts++
		}
		if o.PublicKey != nil {
			if err := c.VerifySignature(o.PublicKey); err != nil {
				return AuditVerification{}, &AuditBreak{ID: c.ID, What: "forged",
					Detail: fmt.Sprintf("the stored %s of %s does not verify with the given key: it was altered, or signed with another key", checkpointName(c), utc(c.At).Format(time.RFC3339))}
			}
		}
		if c.Start {
			starts[c.Hash] = c
		} else if o.PublicKey != nil {
			stored = append(stored, c)
		}
	}
	v := NewChainVerifier(AuditGenesis, dbChainIndex{db, rd})
	if o.MAC != nil {
		v.CheckMACs(o.MAC)
	}
	for _, c := range o.Anchors {
		v.Anchor(c)
	}
	first, next := true, 0
	err = db.auditRecordsOn(ctx, rd, 0, AuditRecordFilter{}, func(r AuditRecord) error {
		if first {
			first = false
			if s, ok := starts[r.PrevHash]; ok && r.PrevHash != AuditGenesis && s.ID < r.ID {
				v.startAfter(s)
				res.Start = s
			}
			for next < len(stored) && stored[next].ID <= res.Start.ID {
				next++ // of rows pruned
			}
		}
		if err := v.Add(ctx, r); err != nil {
			return err
		}
		for ; next < len(stored) && stored[next].ID <= r.ID; next++ {
			c := stored[next]
			at := utc(c.At).Format(time.RFC3339)
			if c.ID < r.ID {
				return &AuditBreak{ID: c.ID, What: "deleted", Detail: fmt.Sprintf("the stored checkpoint of %s names row %d, which is missing", at, c.ID)}
			}
			if c.Hash != r.Hash {
				return &AuditBreak{ID: c.ID, What: "edited", Detail: fmt.Sprintf("the stored checkpoint of %s holds another hash for row %d: the chain was rewritten up to it", at, c.ID)}
			}
			res.Checkpoints++
		}
		return nil
	})
	if err != nil {
		return AuditVerification{}, err
	}
	headID, headHash, err := db.auditHeadOn(ctx, rd)
	if err != nil {
		return AuditVerification{}, err
	}
	id, hash := v.Head()
	if err := v.CheckAnchor(); err != nil {
		return AuditVerification{}, err
	}
	if next < len(stored) {
		c := stored[next]
		return AuditVerification{}, &AuditBreak{ID: c.ID, What: "truncated",
			Detail: fmt.Sprintf("the stored checkpoint of %s names row %d, but the chain ends at row %d: rows after it were deleted", utc(c.At).Format(time.RFC3339), c.ID, id)}
	}
	if headID != id || headHash != hash {
		if headID > id {
			missing := fmt.Sprintf("row %d", headID)
			if headID > id+1 {
				missing = fmt.Sprintf("rows %d to %d", id+1, headID)
			}
			return AuditVerification{}, &AuditBreak{ID: id + 1, What: "deleted",
				Detail: fmt.Sprintf("%s deleted: the chain's head is row %d but the last row is %d", missing, headID, id)}
		}
		if headID < id {
			first, _, err := dbChainIndex{db, rd}.After(ctx, headID)
			if err != nil {
				return AuditVerification{}, fmt.Errorf("verify audit: %w", err)
			}
			return AuditVerification{}, &AuditBreak{ID: first, What: "inserted",
				Detail: fmt.Sprintf("the chain's head is row %d: rows after it were added outside Airlock", headID)}
		}
		return AuditVerification{}, &AuditBreak{ID: id, What: "edited",
			Detail: fmt.Sprintf("the chain's head (row %d, %s) does not match the last row", headID, headHash)}
	}
	res.Rows, res.HeadID, res.HeadHash = v.Rows(), id, hash
	res.MACChecked = o.MAC != nil
	res.MACRows, res.BareRows = v.MACs()
	return res, nil
}

func checkpointName(c AuditCheckpoint) string {
	if c.Start {
		return fmt.Sprintf("start checkpoint at row %d", c.ID)
	}
	return fmt.Sprintf("checkpoint at row %d", c.ID)
}
