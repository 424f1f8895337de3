package storage

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/internal/ids"
)

var _ confirm.QuestionStore = (*DB)(nil)

type questionRow struct {
	ID             string `db:"id"`
	ConversationID int64  `db:"conversation_id"`
	BatchID        string `db:"batch_id"`
	CallKey        string `db:"call_key"`
	Server         string `db:"server"`
	Tool           string `db:"tool"`
	Message        string `db:"message"`
	Fields         string `db:"fields"`
	Status         string `db:"status"`
	Answer         string `db:"answer"`
	AnsweredBy     string `db:"answered_by"`
	Why            string `db:"why"`
	NoticeRef      string `db:"notice_ref"`
	CreatedAt      dbTime `db:"created_at"`
	ExpiresAt      dbTime `db:"expires_at"`
	EndedAt        dbTime `db:"ended_at"`
}

const questionColumns = `id, conversation_id, batch_id, call_key, server, tool, message, fields, status, answer, answered_by, why, notice_ref, created_at, expires_at, ended_at`

// question is the row as the domain's Question; fields or an answer that
// do not parse (a row edited by hand) leave the question with no fields,
// which no submission fits.
func (r questionRow) question() confirm.Question {
	q := confirm.Question{
		ID: r.ID, ConversationID: r.ConversationID, BatchID: r.BatchID, CallKey: r.CallKey, Server: r.Server,
		Tool: r.Tool, Message: r.Message, Status: confirm.QuestionStatus(r.Status), By: r.AnsweredBy, Why: r.Why,
		NoticeRef: r.NoticeRef, CreatedAt: r.CreatedAt.t, ExpiresAt: r.ExpiresAt.t, EndedAt: r.EndedAt.ptr(),
	}
	if err := json.Unmarshal([]byte(r.Fields), &q.Fields); err != nil {
		q.Fields = nil
	}
	if r.Answer != "" {
		if err := json.Unmarshal([]byte(r.Answer), &q.Answer); err != nil {
			q.Answer = nil
		}
	}
	return q
}

// CreateQuestion stores q pending, created at the store's clock and
// expiring ttl later, and audits question_asked (the server, its message
// and the form's fields), in one transaction. q's ID is filled in.
func (db *DB) CreateQuestion(ctx context.Context, q confirm.Question, ttl time.Duration) (confirm.Question, error) {
	if q.ID == "" {
		q.ID = ids.New()
	}
	fields, err := json.Marshal(q.Fields)
	if err != nil {
		return q, fmt.Errorf("create question: fields: %w", err)
	}
	err = db.tx(ctx, func(tx *txn) error {
		q.CreatedAt, q.ExpiresAt = tx.now, tx.now.Add(ttl)
		q.Status, q.Answer, q.By, q.Why, q.EndedAt = confirm.QuestionPending, nil, "", "", nil
		if _, err := db.exec(ctx, tx, db.q(`INSERT INTO questions (id, conversation_id, batch_id, call_key, server, tool, message, fields, status, notice_ref, created_at, expires_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?)`),
			q.ID, q.ConversationID, q.BatchID, q.CallKey, q.Server, q.Tool, q.Message, string(fields), q.NoticeRef,
			db.ts(q.CreatedAt), db.ts(q.ExpiresAt)); err != nil {
			return fmt.Errorf("insert question: %w", err)
		}
		return db.insertAudit(ctx, tx, confirm.AuditEvent{
			At: tx.now, Kind: confirm.AuditQuestionAsked, ConversationID: q.ConversationID, BatchID: q.BatchID,
			CallKey: q.CallKey, Tool: q.Tool, Actor: "airlock",
			Detail: jsonDetail(struct {
				QuestionID string                  `json:"question_id"`
				Server     string                  `json:"server"`
				Message    string                  `json:"message"`
				Fields     []confirm.QuestionField `json:"fields"`
				ExpiresAt  time.Time               `json:"expires_at"`
			}{q.ID, q.Server, q.Message, q.Fields, q.ExpiresAt}),
		})
	})
	if err != nil {
		return q, fmt.Errorf("create question: %w", err)
	}
	return q, nil
}

// Question loads one question; ErrNotFound when none.
func (db *DB) Question(ctx context.Context, id string) (confirm.Question, error) {
	var r questionRow
	if err := db.get(ctx, db.reader(), &r, db.q(`SELECT `+questionColumns+` FROM questions WHERE id = ?`), id); err != nil {
		return confirm.Question{}, fmt.Errorf("load question %s: %w", id, notFound(err))
	}
	return r.question(), nil
}

// EndQuestion ends a pending question by one conditional UPDATE (pending;
// an answer or a decline also before its expiry) and audits
// question_answered, in one transaction; false, and nothing written, when
// another ending won, it expired first, or there is no such question.
func (db *DB) EndQuestion(ctx context.Context, id string, status confirm.QuestionStatus, answer map[string]any, by, why string) (bool, error) {
	if status == confirm.QuestionPending || status == "" {
		return false, fmt.Errorf("end question %s: a question ends accepted, declined or cancelled", id)
	}
	ans := ""
	if status == confirm.QuestionAccepted {
		b, err := json.Marshal(answer)
		if err != nil {
			return false, fmt.Errorf("end question %s: answer: %w", id, err)
		}
		ans = string(b)
	}
	won, err := db.transition(ctx, func(tx *txn) error {
		cond := `status = 'pending'`
		args := []any{string(status), ans, by, why, db.ts(tx.now), id}
		if status != confirm.QuestionCancelled {
			cond += ` AND expires_at > ?`
			args = append(args, db.ts(tx.now))
		}
		var r questionRow
		err := db.updateReturning(ctx, tx, &r,
			`UPDATE questions SET status = ?, answer = ?, answered_by = ?, why = ?, ended_at = ? WHERE id = ? AND `+cond,
			args, questionColumns,
			`SELECT `+questionColumns+` FROM questions WHERE id = ?`, id)
		if err := lostIfNoRows(err, "update question"); err != nil {
			return err
		}
		detail := struct {
			QuestionID string         `json:"question_id"`
			Status     string         `json:"status"`
			Answer     map[string]any `json:"answer,omitempty"`
			Why        string         `json:"why,omitempty"`
		}{id, string(status), answer, why}
		if status != confirm.QuestionAccepted {
			detail.Answer = nil
		}
		return db.insertAudit(ctx, tx, confirm.AuditEvent{
			At: tx.now, Kind: confirm.AuditQuestionAnswered, ConversationID: r.ConversationID, BatchID: r.BatchID,
			CallKey: r.CallKey, Tool: r.Tool, Actor: by, Detail: jsonDetail(detail),
		})
	})
	if err != nil {
		return false, fmt.Errorf("end question %s: %w", id, err)
	}
	return won, nil
}

// SetQuestionNoticeRef records the platform's reference of the question's
// message; ErrNotFound when there is no such question.
func (db *DB) SetQuestionNoticeRef(ctx context.Context, id, ref string) error {
	return db.updateRow(ctx, "set question notice ref", "question "+id,
		`UPDATE questions SET notice_ref = ? WHERE id = ?`, ref, id)
}

// ExpiredQuestions lists up to limit pending questions whose expiry has
// passed at the store's clock, oldest expiry first.
func (db *DB) ExpiredQuestions(ctx context.Context, limit int) ([]confirm.Question, error) {
	var rows []questionRow
	if err := db.sel(ctx, db.reader(), &rows, db.q(`SELECT `+questionColumns+` FROM questions
		WHERE status = 'pending' AND expires_at <= ? ORDER BY expires_at, id LIMIT ?`), db.ts(db.stamp()), limit); err != nil {
		return nil, fmt.Errorf("expired questions: %w", err)
	}
	out := make([]confirm.Question, len(rows))
	for i, r := range rows {
		out[i] = r.question()
	}
	return out, nil
}
