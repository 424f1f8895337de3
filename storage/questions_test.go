package storage

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock/confirm"
)

// questionTests are the confirm.QuestionStore contract, run by
// runConformance against each database.
var questionTests = []conformanceTest{
	{"QuestionAnswered", testQuestionAnswered},
	{"QuestionRace", testQuestionRace},
	{"QuestionExpired", testQuestionExpired},
	{"QuestionEditedByHand", testQuestionEditedByHand},
}

func newQuestion(t *testing.T, db *DB, ttl time.Duration) confirm.Question {
	t.Helper()
	conv := newConversation(t, db)
	min := 1.0
	q, err := db.CreateQuestion(t.Context(), confirm.Question{ConversationID: conv.ID, BatchID: "b1", CallKey: "k1",
		Server: "deploy", Tool: "deploy__ship", Message: "Which environment? <!channel>",
		Fields: []confirm.QuestionField{{Name: "env", Type: "string", Choices: []string{"prod", "staging"}, Required: true},
			{Name: "replicas", Type: "integer", Min: &min}}}, ttl)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// A question is stored pending with its fields, audited as asked; an
// answer ends it once, with who and what, audited; a second ending
// changes nothing.
func testQuestionAnswered(t *testing.T, db *DB) {
	ctx := t.Context()
	q := newQuestion(t, db, time.Hour)
	got, err := db.Question(ctx, q.ID)
	if err != nil || got.Status != confirm.QuestionPending || len(got.Fields) != 2 || got.Fields[0].Choices[1] != "staging" ||
		got.Message != q.Message || !got.ExpiresAt.After(got.CreatedAt) {
		t.Fatalf("Question = %+v, %v", got, err)
	}
	if err := db.SetQuestionNoticeRef(ctx, q.ID, "C1/1.2"); err != nil {
		t.Fatal(err)
	}
	ok, err := db.EndQuestion(ctx, q.ID, confirm.QuestionAccepted, map[string]any{"env": "prod", "replicas": int64(3)}, "U-alice", "")
	if err != nil || !ok {
		t.Fatalf("EndQuestion = %v, %v; want won", ok, err)
	}
	if ok, err := db.EndQuestion(ctx, q.ID, confirm.QuestionDeclined, nil, "U-bob", ""); err != nil || ok {
		t.Fatalf("a second ending = %v, %v; want lost", ok, err)
	}
	got, _ = db.Question(ctx, q.ID)
	if got.Status != confirm.QuestionAccepted || got.By != "U-alice" || got.Answer["env"] != "prod" || got.Answer["replicas"] != float64(3) ||
		got.NoticeRef != "C1/1.2" || got.EndedAt == nil {
		t.Fatalf("answered question = %+v", got)
	}
	asked := auditOf(t, db, q.ConversationID, confirm.AuditQuestionAsked)
	answered := auditOf(t, db, q.ConversationID, confirm.AuditQuestionAnswered)
	if len(asked) != 1 || len(answered) != 1 || answered[0].Actor != "U-alice" || asked[0].Tool != "deploy__ship" {
		t.Fatalf("audit = %+v / %+v", asked, answered)
	}
	if _, err := db.Question(ctx, "nope"); !errors.Is(err, confirm.ErrNotFound) {
		t.Fatalf("an unknown question = %v, want ErrNotFound", err)
	}
	if err := db.SetQuestionNoticeRef(ctx, "nope", "x"); !errors.Is(err, confirm.ErrNotFound) {
		t.Fatalf("SetQuestionNoticeRef(unknown) = %v, want ErrNotFound", err)
	}
}

// Eight endings at once (answers, declines, a cancel): one wins, and one
// question_answered row says which.
func testQuestionRace(t *testing.T, db *DB) {
	q := newQuestion(t, db, time.Hour)
	const n = 8
	var wg sync.WaitGroup
	won := make([]bool, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			st := []confirm.QuestionStatus{confirm.QuestionAccepted, confirm.QuestionDeclined, confirm.QuestionCancelled}[i%3]
			won[i], errs[i] = db.EndQuestion(t.Context(), q.ID, st, map[string]any{"env": "prod"}, "U-"+string(rune('a'+i)), "")
		})
	}
	wg.Wait()
	wins := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("EndQuestion %d: %v", i, errs[i])
		}
		if won[i] {
			wins++
		}
	}
	got, _ := db.Question(t.Context(), q.ID)
	evs := auditOf(t, db, q.ConversationID, confirm.AuditQuestionAnswered)
	if wins != 1 || len(evs) != 1 || evs[0].Actor != got.By {
		t.Fatalf("%d endings won, audit %+v, question %+v; want one", wins, evs, got)
	}
}

// Past its expiry a question takes no answer and no decline; it is listed
// as expired until cancelled.
func testQuestionExpired(t *testing.T, db *DB) {
	ctx := t.Context()
	q := newQuestion(t, db, time.Minute)
	if got, err := db.ExpiredQuestions(ctx, 10); err != nil || len(got) != 0 {
		t.Fatalf("expired before the expiry = %+v, %v", got, err)
	}
	later := clockAt(db, q.ExpiresAt.Add(time.Second))
	if ok, err := later.EndQuestion(ctx, q.ID, confirm.QuestionAccepted, map[string]any{"env": "prod"}, "U-alice", ""); err != nil || ok {
		t.Fatalf("an answer after expiry = %v, %v; want refused", ok, err)
	}
	exp, err := later.ExpiredQuestions(ctx, 10)
	if err != nil || len(exp) != 1 || exp[0].ID != q.ID {
		t.Fatalf("ExpiredQuestions = %+v, %v", exp, err)
	}
	if ok, err := later.EndQuestion(ctx, q.ID, confirm.QuestionCancelled, nil, "airlock", "expired"); err != nil || !ok {
		t.Fatalf("cancel = %v, %v", ok, err)
	}
	if exp, _ := later.ExpiredQuestions(ctx, 10); len(exp) != 0 {
		t.Fatalf("a cancelled question is still listed: %+v", exp)
	}
}

// A row whose fields were edited by hand into something unreadable loads
// with no fields, which no answer fits.
func testQuestionEditedByHand(t *testing.T, db *DB) {
	ctx := t.Context()
	q := newQuestion(t, db, time.Hour)
	if _, err := db.x.ExecContext(ctx, db.q(`UPDATE questions SET fields = 'not json' WHERE id = ?`), q.ID); err != nil {
		t.Fatal(err)
	}
	got, err := db.Question(ctx, q.ID)
	if err != nil || got.Fields != nil {
		t.Fatalf("edited question = %+v, %v", got, err)
	}
	if _, err := confirm.ParseAnswer(got.Fields, []string{"prod", "2"}); !errors.Is(err, confirm.ErrBadAnswer) {
		t.Fatalf("an answer to a question without fields = %v, want ErrBadAnswer", err)
	}
}
