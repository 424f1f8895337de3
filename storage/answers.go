package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/airlockhq/airlock/confirm"
)

var _ confirm.AnswerStore = (*DB)(nil)

// answerRow is a row of answers.
type answerRow struct {
	ID             int64  `db:"id"`
	ConversationID int64  `db:"conversation_id"`
	Seq            int    `db:"seq"`
	CreatedAt      dbTime `db:"created_at"`
	Attempts       int    `db:"attempts"`
	ClaimedBy      string `db:"claimed_by"`
}

func (r answerRow) answer() confirm.Answer {
	return confirm.Answer{ID: r.ID, ConversationID: r.ConversationID, Seq: r.Seq, CreatedAt: r.CreatedAt.t, Attempts: r.Attempts, Holder: r.ClaimedBy}
}

const answerColumns = `id, conversation_id, seq, created_at, attempts, claimed_by`

// claimableAnswer is the condition of an answer that may be claimed at a
// time (bound twice): nobody holds it, or its claim lapsed, and its retry
// is due.
const claimableAnswer = `(claimed_by = '' OR claimed_until IS NULL OR claimed_until <= ?) AND (retry_at IS NULL OR retry_at <= ?)`

// AppendAnswer implements confirm.AnswerStore.
func (db *DB) AppendAnswer(ctx context.Context, conversationID int64, holder string, ttl time.Duration, msgs ...confirm.Message) (confirm.Answer, bool, error) {
	switch {
	case len(msgs) == 0:
		return confirm.Answer{}, false, errors.New("append answer: no message")
	case holder == "" || ttl <= 0:
		return confirm.Answer{}, false, errors.New("append answer: a holder and a positive ttl are needed")
	}
	out := append([]confirm.Message(nil), msgs...)
	var (
		r       answerRow
		earlier int
	)
	err := db.tx(ctx, func(tx *txn) error {
		if err := db.appendMessages(ctx, tx, conversationID, out); err != nil {
			return err
		}
		last := out[len(out)-1]
		now := tx.now
		if err := db.get(ctx, tx, &r, db.q(`INSERT INTO answers (conversation_id, seq, created_at, attempts, claimed_by, claimed_until)
			VALUES (?, ?, ?, 1, ?, ?) RETURNING `+answerColumns), conversationID, last.Seq, db.ts(now), holder, db.ts(now.Add(ttl))); err != nil {
			return fmt.Errorf("insert answer: %w", err)
		}
		return db.get(ctx, tx, &earlier, db.q(`SELECT COUNT(*) FROM answers WHERE conversation_id = ? AND seq < ?`), conversationID, last.Seq)
	})
	if err != nil {
		return confirm.Answer{}, false, fmt.Errorf("append answer: %w", err)
	}
	copy(msgs, out)
	return r.answer(), earlier > 0, nil
}

// Answers implements confirm.AnswerStore.
func (db *DB) Answers(ctx context.Context, conversationID int64) ([]confirm.Answer, error) {
	var rows []answerRow
	if err := db.sel(ctx, db.reader(), &rows, db.q(`SELECT `+answerColumns+` FROM answers WHERE conversation_id = ? ORDER BY seq`), conversationID); err != nil {
		return nil, fmt.Errorf("answers of conversation %d: %w", conversationID, err)
	}
	out := make([]confirm.Answer, len(rows))
	for i, r := range rows {
		out[i] = r.answer()
	}
	return out, nil
}

// DueAnswers implements confirm.AnswerStore. It reads a reader: an
// answer listed that can no longer be claimed is refused by its claim.
func (db *DB) DueAnswers(ctx context.Context, platforms []string, limit int) ([]int64, error) {
	if limit <= 0 {
		return nil, errors.New("due answers: a positive limit is needed")
	}
	if len(platforms) == 0 {
		return nil, nil
	}
	now := db.ts(db.stamp())
	in, args := "?", []any{platforms[0]}
	for _, p := range platforms[1:] {
		in += ", ?"
		args = append(args, p)
	}
	var ids []int64
	if err := db.sel(ctx, db.reader(), &ids, db.q(`SELECT a.conversation_id FROM answers a JOIN conversations c ON c.id = a.conversation_id
		WHERE c.platform IN (`+in+`) AND a.seq = (SELECT MIN(seq) FROM answers o WHERE o.conversation_id = a.conversation_id)
		AND `+claimableAnswer+` ORDER BY a.id LIMIT ?`), append(args, now, now, limit)...); err != nil {
		return nil, fmt.Errorf("due answers: %w", err)
	}
	return ids, nil
}

// ClaimAnswer implements confirm.AnswerStore.
func (db *DB) ClaimAnswer(ctx context.Context, id int64, holder string, ttl time.Duration) (confirm.Answer, bool, error) {
	if holder == "" || ttl <= 0 {
		return confirm.Answer{}, false, errors.New("claim answer: a holder and a positive ttl are needed")
	}
	now := db.stamp()
	var r answerRow
	err := db.get(ctx, db.x, &r, db.q(`UPDATE answers SET claimed_by = ?, claimed_until = ?, attempts = attempts + 1
		WHERE id = ? AND `+claimableAnswer+` RETURNING `+answerColumns), holder, db.ts(now.Add(ttl)), id, db.ts(now), db.ts(now))
	if errors.Is(err, sql.ErrNoRows) {
		return confirm.Answer{}, false, nil // another process won it, it waits, or it was posted
	}
	if err != nil {
		return confirm.Answer{}, false, fmt.Errorf("claim answer %d: %w", id, err)
	}
	return r.answer(), true, nil
}

// RenewAnswer implements confirm.AnswerStore.
func (db *DB) RenewAnswer(ctx context.Context, id int64, holder string, ttl time.Duration) (bool, error) {
	n, err := db.execCount(ctx, db.x, db.q(`UPDATE answers SET claimed_until = ? WHERE id = ? AND claimed_by = ?`),
		db.ts(db.stamp().Add(ttl)), id, holder)
	if err != nil {
		return false, fmt.Errorf("renew answer %d: %w", id, err)
	}
	return n == 1, nil
}

// RetryAnswer implements confirm.AnswerStore.
func (db *DB) RetryAnswer(ctx context.Context, id int64, holder string, after time.Duration) error {
	if _, err := db.exec(ctx, db.x, db.q(`UPDATE answers SET claimed_by = '', claimed_until = NULL, retry_at = ?
		WHERE id = ? AND claimed_by = ?`), db.ts(db.stamp().Add(after)), id, holder); err != nil {
		return fmt.Errorf("retry answer %d: %w", id, err)
	}
	return nil
}

// ReleaseAnswer implements confirm.AnswerStore.
func (db *DB) ReleaseAnswer(ctx context.Context, id int64, holder string) error {
	if _, err := db.exec(ctx, db.x, db.q(`UPDATE answers SET claimed_by = '', claimed_until = NULL,
		attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END
		WHERE id = ? AND claimed_by = ?`), id, holder); err != nil {
		return fmt.Errorf("release answer %d: %w", id, err)
	}
	return nil
}

// AnswerPosted implements confirm.AnswerStore.
func (db *DB) AnswerPosted(ctx context.Context, id int64) error {
	if _, err := db.exec(ctx, db.x, db.q(`DELETE FROM answers WHERE id = ?`), id); err != nil {
		return fmt.Errorf("answer %d posted: %w", id, err)
	}
	return nil
}
