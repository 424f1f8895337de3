package storage

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/airlockhq/airlock/confirm"
)

type conversationRow struct {
	ID        int64  `db:"id"`
	Platform  string `db:"platform"`
	Channel   string `db:"channel"`
	Thread    string `db:"thread"`
	DM        bool   `db:"dm"`
	CreatedAt dbTime `db:"created_at"`
}

func (r conversationRow) conversation() confirm.Conversation {
	return confirm.Conversation{ID: r.ID, Platform: r.Platform, Channel: r.Channel, Thread: r.Thread, DM: r.DM, CreatedAt: r.CreatedAt.t}
}

type messageRow struct {
	ConversationID int64  `db:"conversation_id"`
	Seq            int    `db:"seq"`
	Role           string `db:"role"`
	Body           string `db:"body"`
	CreatedAt      dbTime `db:"created_at"`
}

// Conversation returns the conversation of a thread, creating it with dm
// (a direct message); an existing conversation keeps its own dm. Concurrent
// callers for one thread get the same row.
func (db *DB) Conversation(ctx context.Context, platform, channel, thread string, dm bool) (confirm.Conversation, error) {
	_, err := db.exec(ctx, db.x, db.q(`INSERT INTO conversations (platform, channel, thread, dm, created_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (platform, channel, thread) DO NOTHING`), platform, channel, thread, dm, db.ts(db.now()))
	if err != nil {
		return confirm.Conversation{}, fmt.Errorf("create conversation: %w", err)
	}
	return db.FindConversation(ctx, platform, channel, thread)
}

// FindConversation returns the conversation of a thread; ErrNotFound when
// the thread holds none.
func (db *DB) FindConversation(ctx context.Context, platform, channel, thread string) (confirm.Conversation, error) {
	var r conversationRow
	err := db.get(ctx, db.reader(), &r, db.q(`SELECT id, platform, channel, thread, dm, created_at FROM conversations
		WHERE platform = ? AND channel = ? AND thread = ?`), platform, channel, thread)
	if err != nil {
		return confirm.Conversation{}, fmt.Errorf("load conversation: %w", notFound(err))
	}
	return r.conversation(), nil
}

// ConversationByID loads a conversation; ErrNotFound when none.
func (db *DB) ConversationByID(ctx context.Context, id int64) (confirm.Conversation, error) {
	var r conversationRow
	err := db.get(ctx, db.reader(), &r, db.q(`SELECT id, platform, channel, thread, dm, created_at FROM conversations WHERE id = ?`), id)
	if err != nil {
		return confirm.Conversation{}, fmt.Errorf("load conversation %d: %w", id, notFound(err))
	}
	return r.conversation(), nil
}

// AppendMessages appends msgs in order with the next sequence numbers,
// setting Seq (and a zero CreatedAt) in msgs.
func (db *DB) AppendMessages(ctx context.Context, conversationID int64, msgs ...confirm.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	out := append([]confirm.Message(nil), msgs...)
	err := db.tx(ctx, func(tx *txn) error {
		return db.appendMessages(ctx, tx, conversationID, out)
	})
	if err != nil {
		return fmt.Errorf("append messages: %w", err)
	}
	copy(msgs, out)
	return nil
}

// appendMessages inserts msgs after the conversation's last message,
// setting their ConversationID, Seq and zero CreatedAt. Concurrent
// appenders queue: on PostgreSQL on the conversation row's lock, taken
// first, on SQLite on the transaction's write lock (the primary key on
// (conversation_id, seq) backs this up).
func (db *DB) appendMessages(ctx context.Context, tx *txn, conversationID int64, msgs []confirm.Message) error {
	var last int
	if db.driver == DriverPostgres {
		var id int64
		if err := db.get(ctx, tx, &id, db.q(`SELECT id FROM conversations WHERE id = ? FOR UPDATE`), conversationID); err != nil {
			return fmt.Errorf("conversation %d: %w", conversationID, notFound(err))
		}
		if err := db.get(ctx, tx, &last, db.q(`SELECT COALESCE(MAX(seq), 0) FROM messages WHERE conversation_id = ?`), conversationID); err != nil {
			return fmt.Errorf("last seq: %w", err)
		}
	} else {
		// SQLite's write lock, taken by the transaction, already queues
		// appenders: one statement checks the conversation and reads
		// its last seq.
		var row struct {
			ID   sql.NullInt64 `db:"id"`
			Last int           `db:"last"`
		}
		if err := db.get(ctx, tx, &row, db.q(`SELECT (SELECT id FROM conversations WHERE id = ?) AS id,
			COALESCE((SELECT MAX(seq) FROM messages WHERE conversation_id = ?), 0) AS last`), conversationID, conversationID); err != nil {
			return fmt.Errorf("last seq: %w", err)
		}
		if !row.ID.Valid {
			return fmt.Errorf("conversation %d: %w", conversationID, confirm.ErrNotFound)
		}
		last = row.Last
	}
	insert := db.q(`INSERT INTO messages (conversation_id, seq, role, body, created_at) VALUES (?, ?, ?, ?, ?)`)
	for i := range msgs {
		m := &msgs[i]
		m.ConversationID = conversationID
		m.Seq = last + 1 + i
		m.CreatedAt = tx.nowOr(m.CreatedAt)
		if _, err := db.exec(ctx, tx, insert, conversationID, m.Seq, m.Role, string(m.Body), db.ts(m.CreatedAt)); err != nil {
			return fmt.Errorf("insert message %d: %w", m.Seq, err)
		}
	}
	return nil
}

// Messages returns the conversation's messages in order.
func (db *DB) Messages(ctx context.Context, conversationID int64) ([]confirm.Message, error) {
	var rows []messageRow
	err := db.sel(ctx, db.reader(), &rows, db.q(`SELECT conversation_id, seq, role, body, created_at FROM messages
		WHERE conversation_id = ? ORDER BY seq`), conversationID)
	if err != nil {
		return nil, fmt.Errorf("load messages: %w", err)
	}
	out := make([]confirm.Message, len(rows))
	for i, r := range rows {
		out[i] = confirm.Message{ConversationID: r.ConversationID, Seq: r.Seq, Role: r.Role, Body: rawBytes(r.Body), CreatedAt: r.CreatedAt.t}
	}
	return out, nil
}

// Message loads one message of a conversation; ErrNotFound when none.
func (db *DB) Message(ctx context.Context, conversationID int64, seq int) (confirm.Message, error) {
	var r messageRow
	err := db.get(ctx, db.reader(), &r, db.q(`SELECT conversation_id, seq, role, body, created_at FROM messages
		WHERE conversation_id = ? AND seq = ?`), conversationID, seq)
	if err != nil {
		return confirm.Message{}, fmt.Errorf("load message %d: %w", seq, notFound(err))
	}
	return confirm.Message{ConversationID: r.ConversationID, Seq: r.Seq, Role: r.Role, Body: rawBytes(r.Body), CreatedAt: r.CreatedAt.t}, nil
}

// UnansweredConversations lists conversations whose newest message is a
// tool-results message: the model was never asked to answer it (the
// process died in between).
func (db *DB) UnansweredConversations(ctx context.Context) ([]int64, error) {
	var ids []int64
	if err := db.sel(ctx, db.reader(), &ids, `SELECT m.conversation_id FROM messages m
		WHERE m.role = 'tool' AND m.seq = (SELECT MAX(seq) FROM messages WHERE conversation_id = m.conversation_id)
		ORDER BY m.conversation_id`); err != nil {
		return nil, fmt.Errorf("unanswered conversations: %w", err)
	}
	return ids, nil
}
