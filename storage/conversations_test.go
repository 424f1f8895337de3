package storage

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock/confirm"
)

func testConversationGetOrCreate(t *testing.T, db *DB) {
	ctx := t.Context()
	a, err := db.Conversation(ctx, "slack", "C1", "T1", false)
	if err != nil {
		t.Fatal(err)
	}
	b, err := db.Conversation(ctx, "slack", "C1", "T1", false)
	if err != nil {
		t.Fatal(err)
	}
	if a.ID == 0 || a.ID != b.ID || !a.CreatedAt.Equal(b.CreatedAt) {
		t.Fatalf("get-or-create not idempotent: %+v vs %+v", a, b)
	}
	if a.Platform != "slack" || a.Channel != "C1" || a.Thread != "T1" {
		t.Fatalf("fields: %+v", a)
	}
	other, err := db.Conversation(ctx, "slack", "C1", "", false)
	if err != nil {
		t.Fatal(err)
	}
	if other.ID == a.ID {
		t.Fatal("a different thread got the same conversation")
	}
	if err := db.AppendMessages(ctx, a.ID, confirm.Message{Role: "user", Body: json.RawMessage(`{"x":1}`)}); err != nil {
		t.Fatal(err)
	}
	if m, err := db.Message(ctx, a.ID, 1); err != nil || string(m.Body) != `{"x":1}` {
		t.Fatalf("Message = %+v, %v", m, err)
	}
	if _, err := db.Message(ctx, a.ID, 2); !errors.Is(err, confirm.ErrNotFound) {
		t.Fatalf("Message of a missing seq: %v", err)
	}
	found, err := db.FindConversation(ctx, "slack", "C1", "T1")
	if err != nil || found.ID != a.ID {
		t.Fatalf("FindConversation = %+v, %v", found, err)
	}
	if _, err := db.FindConversation(ctx, "slack", "C1", "no-such-thread"); !errors.Is(err, confirm.ErrNotFound) {
		t.Fatalf("FindConversation of a thread without one: %v", err)
	}
	byID, err := db.ConversationByID(ctx, a.ID)
	if err != nil || byID.ID != a.ID || byID.Thread != "T1" {
		t.Fatalf("ConversationByID = %+v, %v", byID, err)
	}
	if _, err := db.ConversationByID(ctx, 987654); !errors.Is(err, confirm.ErrNotFound) {
		t.Fatalf("ConversationByID(missing) error = %v, want ErrNotFound", err)
	}

	// Concurrent get-or-create of one thread yields one row.
	ids, errs := race(20, func(int) (int64, error) {
		c, err := db.Conversation(ctx, "discord", "G", "same", false)
		return c.ID, err
	})
	for i := range ids {
		if errs[i] != nil {
			t.Fatalf("concurrent Conversation: %v", errs[i])
		}
		if ids[i] != ids[0] {
			t.Fatalf("concurrent Conversation returned ids %v", ids)
		}
	}
}

func testMessagesOrderAndBytes(t *testing.T, db *DB) {
	ctx := t.Context()
	conv := newConversation(t, db)
	bodies := []string{
		`{"role":"user","text":"hi"}`,
		"{ \"text\" :\t\"caf\u00e9 \\u0000 \\\"q\\\"\",\n  \"n\": 1.50 }",
		`"just a string"`,
		`[1,  2 ,3]`,
	}
	msgs := []confirm.Message{
		{Role: "user", Body: json.RawMessage(bodies[0])},
		{Role: "assistant", Body: json.RawMessage(bodies[1])},
	}
	if err := db.AppendMessages(ctx, conv.ID, msgs...); err != nil {
		t.Fatal(err)
	}
	if msgs[0].Seq != 1 || msgs[1].Seq != 2 {
		t.Errorf("AppendMessages set seqs %d, %d; want 1, 2", msgs[0].Seq, msgs[1].Seq)
	}
	if err := db.AppendMessages(ctx, conv.ID, confirm.Message{Role: "tool", Body: json.RawMessage(bodies[2])}); err != nil {
		t.Fatal(err)
	}
	if err := db.AppendMessages(ctx, conv.ID, confirm.Message{Role: "user", Body: json.RawMessage(bodies[3])}); err != nil {
		t.Fatal(err)
	}
	if err := db.AppendMessages(ctx, conv.ID); err != nil {
		t.Fatalf("AppendMessages with none: %v", err)
	}
	got, err := db.Messages(ctx, conv.ID)
	if err != nil {
		t.Fatal(err)
	}
	roles := []string{"user", "assistant", "tool", "user"}
	if len(got) != len(bodies) {
		t.Fatalf("got %d messages, want %d", len(got), len(bodies))
	}
	for i, m := range got {
		if m.Seq != i+1 || m.Role != roles[i] || m.ConversationID != conv.ID {
			t.Errorf("message %d = seq %d role %q conv %d", i, m.Seq, m.Role, m.ConversationID)
		}
		if !bytes.Equal(m.Body, []byte(bodies[i])) {
			t.Errorf("message %d body = %q, want %q", i, m.Body, bodies[i])
		}
		if m.CreatedAt.IsZero() || m.CreatedAt.Location() != time.UTC {
			t.Errorf("message %d CreatedAt = %v, want set, UTC", i, m.CreatedAt)
		}
	}
	other := newConversation(t, db)
	if got, err := db.Messages(ctx, other.ID); err != nil || len(got) != 0 {
		t.Fatalf("Messages(empty) = %v, %v", got, err)
	}
	if err := db.AppendMessages(ctx, 987654, confirm.Message{Role: "user", Body: json.RawMessage(`1`)}); !errors.Is(err, confirm.ErrNotFound) {
		t.Fatalf("AppendMessages(missing conversation) error = %v, want ErrNotFound", err)
	}
}

func testConcurrentAppend(t *testing.T, db *DB) {
	ctx := t.Context()
	conv := newConversation(t, db)
	const workers, each = 10, 3
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			<-start
			for i := range each {
				body := fmt.Sprintf(`{"w":%d,"i":%d}`, w, i)
				if err := db.AppendMessages(ctx, conv.ID, confirm.Message{Role: "user", Body: json.RawMessage(body)}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent AppendMessages: %v", err)
	}
	got, err := db.Messages(ctx, conv.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != workers*each {
		t.Fatalf("got %d messages, want %d", len(got), workers*each)
	}
	for i, m := range got {
		if m.Seq != i+1 {
			t.Fatalf("message %d has seq %d", i, m.Seq)
		}
	}
}

func testTimeRoundTrip(t *testing.T, db *DB) {
	ctx := t.Context()
	conv := newConversation(t, db)
	if d := time.Since(conv.CreatedAt); d < 0 || d > time.Minute || conv.CreatedAt.Location() != time.UTC {
		t.Errorf("conversation CreatedAt = %v", conv.CreatedAt)
	}
	at := time.Date(2029, 12, 31, 23, 59, 59, 987654321, time.FixedZone("EST", -5*3600))
	if err := db.AppendMessages(ctx, conv.ID, confirm.Message{Role: "user", Body: json.RawMessage(`1`), CreatedAt: at}); err != nil {
		t.Fatal(err)
	}
	msgs, err := db.Messages(ctx, conv.ID)
	if err != nil {
		t.Fatal(err)
	}
	got := msgs[0].CreatedAt
	if want := at.Truncate(time.Microsecond); !got.Equal(want) || got.Location() != time.UTC {
		t.Fatalf("CreatedAt round trip = %v, want %v (to the microsecond) in UTC", got, want)
	}
	// Expiry comparisons use time order, not text order, across zones.
	expires := time.Date(2030, 1, 1, 0, 0, 0, 0, time.FixedZone("E", 9*3600)) // 2029-12-31T15:00Z
	b := newBatch(t, db, expires, confirm.DecisionPending)
	if ids, _ := clockAt(db, time.Date(2029, 12, 31, 14, 0, 0, 0, time.UTC)).ExpiredBatches(ctx); len(ids) != 0 {
		t.Errorf("expired an hour early: %v", ids)
	}
	if ids, _ := clockAt(db, time.Date(2029, 12, 31, 10, 0, 1, 0, time.FixedZone("W", -5*3600))).ExpiredBatches(ctx); len(ids) != 1 || ids[0] != b.ID {
		t.Errorf("not expired a second after expiry: %v", ids)
	}
}

func testUnanswered(t *testing.T, db *DB) {
	ctx := t.Context()
	a, b := newConversation(t, db), newConversation(t, db)
	msg := func(role string) confirm.Message { return confirm.Message{Role: role, Body: json.RawMessage(`{}`)} }
	if err := db.AppendMessages(ctx, a.ID, msg("user"), msg("assistant"), msg("tool")); err != nil {
		t.Fatal(err)
	}
	if err := db.AppendMessages(ctx, b.ID, msg("user"), msg("assistant"), msg("tool"), msg("assistant")); err != nil {
		t.Fatal(err)
	}
	ids, err := db.UnansweredConversations(ctx)
	if err != nil || len(ids) != 1 || ids[0] != a.ID {
		t.Fatalf("unanswered = %v, %v; want only %d", ids, err, a.ID)
	}
}

func testConversationDM(t *testing.T, db *DB) {
	ctx := t.Context()
	dm, err := db.Conversation(ctx, "slack", "D1", "", true)
	if err != nil {
		t.Fatal(err)
	}
	if !dm.DM {
		t.Fatalf("created with dm: %+v", dm)
	}
	// An existing conversation keeps its own dm, whatever later callers say.
	again, err := db.Conversation(ctx, "slack", "D1", "", false)
	if err != nil || again.ID != dm.ID || !again.DM {
		t.Fatalf("Conversation(dm=false) of a dm = %+v, %v", again, err)
	}
	ch, err := db.Conversation(ctx, "slack", "C1", "T1", false)
	if err != nil || ch.DM {
		t.Fatalf("Conversation(dm=false) = %+v, %v", ch, err)
	}
	if again, err := db.Conversation(ctx, "slack", "C1", "T1", true); err != nil || again.ID != ch.ID || again.DM {
		t.Fatalf("Conversation(dm=true) of a channel thread = %+v, %v", again, err)
	}
	if found, err := db.FindConversation(ctx, "slack", "D1", ""); err != nil || found.ID != dm.ID || !found.DM {
		t.Fatalf("FindConversation = %+v, %v", found, err)
	}
	if found, err := db.FindConversation(ctx, "slack", "C1", "T1"); err != nil || found.DM {
		t.Fatalf("FindConversation = %+v, %v", found, err)
	}
	if byID, err := db.ConversationByID(ctx, dm.ID); err != nil || !byID.DM || byID.Channel != "D1" {
		t.Fatalf("ConversationByID = %+v, %v", byID, err)
	}
	if byID, err := db.ConversationByID(ctx, ch.ID); err != nil || byID.DM {
		t.Fatalf("ConversationByID = %+v, %v", byID, err)
	}
}
