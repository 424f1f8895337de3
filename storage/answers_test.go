package storage

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock/confirm"
)

var answerTests = []conformanceTest{
	{"AnswerStoredWithItsMessage", testAnswerStoredWithItsMessage},
	{"AnswerClaims", testAnswerClaims},
	{"AnswerRetryAndRelease", testAnswerRetryAndRelease},
	{"AnswersDueInOrder", testAnswersDueInOrder},
	{"AnswersClearedAtStart", testAnswersClearedAtStart},
}

func answerMsg(text string) confirm.Message {
	return confirm.Message{Role: "assistant", Body: json.RawMessage(fmt.Sprintf(`{"role":"assistant","text":%q}`, text))}
}

func appendAnswer(t *testing.T, db *DB, convID int64, holder string, msgs ...confirm.Message) (confirm.Answer, bool) {
	t.Helper()
	a, earlier, err := db.AppendAnswer(t.Context(), convID, holder, time.Minute, msgs...)
	if err != nil {
		t.Fatalf("AppendAnswer: %v", err)
	}
	return a, earlier
}

func seqsOf(as []confirm.Answer) []int {
	var out []int
	for _, a := range as {
		out = append(out, a.Seq)
	}
	return out
}

func answersOf(t *testing.T, db *DB, convID int64) []confirm.Answer {
	t.Helper()
	as, err := db.Answers(t.Context(), convID)
	if err != nil {
		t.Fatal(err)
	}
	return as
}

// An answer is stored with its message (the last of those appended), in
// one transaction: a failed append stores neither; the answer is held by
// its storer and says whether older answers of its conversation wait.
func testAnswerStoredWithItsMessage(t *testing.T, db *DB) {
	ctx := t.Context()
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	clockAt(db, now)
	conv := newConversation(t, db)
	if err := db.AppendMessages(ctx, conv.ID, confirm.Message{Role: "user", Body: json.RawMessage(`{"text":"hi"}`)}); err != nil {
		t.Fatal(err)
	}
	calls := confirm.Message{Role: "assistant", Body: json.RawMessage(`{"tool_calls":[{"id":"c1"}]}`)}
	results := confirm.Message{Role: "tool", Body: json.RawMessage(`{"results":[]}`)}
	msgs := []confirm.Message{calls, results, answerMsg("stopped")}
	a, earlier := appendAnswer(t, db, conv.ID, "p1", msgs...)
	if earlier || a.Seq != 4 || a.ConversationID != conv.ID || a.Holder != "p1" || a.Attempts != 1 || !a.CreatedAt.Equal(now) {
		t.Fatalf("answer %+v (earlier %v); want seq 4 held by p1, one attempt", a, earlier)
	}
	if msgs[2].Seq != 4 || msgs[0].Seq != 2 {
		t.Fatalf("the messages' Seq were not set: %+v", msgs)
	}
	stored, err := db.Message(ctx, conv.ID, 4)
	if err != nil || string(stored.Body) != string(answerMsg("stopped").Body) {
		t.Fatalf("the answer's message: %+v, %v", stored, err)
	}
	if _, earlier := appendAnswer(t, db, conv.ID, "p1", answerMsg("later")); !earlier {
		t.Fatal("a second answer was not told the first waits")
	}
	if got := seqsOf(answersOf(t, db, conv.ID)); !slices.Equal(got, []int{4, 5}) {
		t.Fatalf("answers %v; want 4 and 5", got)
	}
	// Nothing stored for a conversation that does not exist, or without
	// a holder or a message.
	if _, _, err := db.AppendAnswer(ctx, 1<<40, "p1", time.Minute, answerMsg("x")); err == nil {
		t.Fatal("stored an answer in a conversation that does not exist")
	}
	if _, _, err := db.AppendAnswer(ctx, conv.ID, "", time.Minute, answerMsg("x")); err == nil {
		t.Fatal("stored an answer without a holder")
	}
	if _, _, err := db.AppendAnswer(ctx, conv.ID, "p1", time.Minute); err == nil {
		t.Fatal("stored an answer without a message")
	}
	if msgs, _ := db.Messages(ctx, conv.ID); len(msgs) != 5 {
		t.Fatalf("%d messages after the refused appends; want 5", len(msgs))
	}
	// Posted, an answer is forgotten; again is no error.
	for range 2 {
		if err := db.AnswerPosted(ctx, a.ID); err != nil {
			t.Fatal(err)
		}
	}
	if got := seqsOf(answersOf(t, db, conv.ID)); !slices.Equal(got, []int{5}) {
		t.Fatalf("answers %v after 4 was posted; want 5", got)
	}
}

// An answer is claimed by nobody while its holder's claim lives (renewed
// while it posts); once it lapses, by one claimer, counting an attempt.
func testAnswerClaims(t *testing.T, db *DB) {
	ctx := t.Context()
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	clockAt(db, now)
	conv := newConversation(t, db)
	a, _ := appendAnswer(t, db, conv.ID, "p1", answerMsg("one"))
	claim := func(holder string) (confirm.Answer, bool) {
		t.Helper()
		got, ok, err := db.ClaimAnswer(ctx, a.ID, holder, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return got, ok
	}
	if _, ok := claim("p2"); ok {
		t.Fatal("p2 claimed an answer p1 is posting")
	}
	clockAt(db, now.Add(50*time.Second))
	if ok, err := db.RenewAnswer(ctx, a.ID, "p1", time.Minute); err != nil || !ok {
		t.Fatalf("RenewAnswer: %v %v", ok, err)
	}
	if ok, err := db.RenewAnswer(ctx, a.ID, "p2", time.Minute); err != nil || ok {
		t.Fatalf("p2 renewed p1's claim: %v %v", ok, err)
	}
	if _, ok := claim("p2"); ok {
		t.Fatal("p2 claimed an answer p1 renewed")
	}
	clockAt(db, now.Add(111*time.Second)) // p1 died
	got, ok := claim("p2")
	if !ok || got.Holder != "p2" || got.Attempts != 2 || got.Seq != a.Seq {
		t.Fatalf("p2's claim after p1's lapsed: %+v %v; want held by p2, two attempts", got, ok)
	}
	if _, ok := claim("p3"); ok {
		t.Fatal("p3 claimed an answer p2 holds")
	}
	if ok, err := db.RenewAnswer(ctx, a.ID, "p1", time.Minute); err != nil || ok {
		t.Fatalf("the dead p1 renewed a claim it lost: %v %v", ok, err)
	}
	if err := db.AnswerPosted(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	clockAt(db, now.Add(time.Hour))
	if _, ok := claim("p3"); ok {
		t.Fatal("claimed an answer posted")
	}
	if _, _, err := db.ClaimAnswer(ctx, a.ID, "", time.Minute); err == nil {
		t.Fatal("claimed without a holder")
	}
}

// A failed post gives its answer back for a retry no sooner than asked;
// an answer given back untried may be claimed at once, that claim's
// attempt not counted; neither by anyone but its holder.
func testAnswerRetryAndRelease(t *testing.T, db *DB) {
	ctx := t.Context()
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	clockAt(db, now)
	conv := newConversation(t, db)
	a, _ := appendAnswer(t, db, conv.ID, "p1", answerMsg("one"))
	if err := db.RetryAnswer(ctx, a.ID, "p2", time.Second); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := db.ClaimAnswer(ctx, a.ID, "p3", time.Minute); ok {
		t.Fatal("a retry by another holder gave the answer back")
	}
	if err := db.RetryAnswer(ctx, a.ID, "p1", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := db.ClaimAnswer(ctx, a.ID, "p1", time.Minute); ok {
		t.Fatal("claimed before its retry was due")
	}
	clockAt(db, now.Add(30*time.Second))
	got, ok, err := db.ClaimAnswer(ctx, a.ID, "p1", time.Minute)
	if err != nil || !ok || got.Attempts != 2 {
		t.Fatalf("claim once the retry was due: %+v %v %v", got, ok, err)
	}
	if err := db.ReleaseAnswer(ctx, a.ID, "p2"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := db.ClaimAnswer(ctx, a.ID, "p3", time.Minute); ok {
		t.Fatal("a release by another holder gave the answer back")
	}
	if err := db.ReleaseAnswer(ctx, a.ID, "p1"); err != nil {
		t.Fatal(err)
	}
	got, ok, err = db.ClaimAnswer(ctx, a.ID, "p3", time.Minute)
	if err != nil || !ok || got.Attempts != 2 || got.Holder != "p3" {
		t.Fatalf("claim after the release: %+v %v %v; want p3's, still two attempts", got, ok, err)
	}
}

// DueAnswers names each conversation whose oldest answer not posted may
// be claimed now, of the platforms asked for: not one whose oldest answer
// someone holds, or waits for its retry, even when a later one could be
// claimed (answers go in order).
func testAnswersDueInOrder(t *testing.T, db *DB) {
	ctx := t.Context()
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	clockAt(db, now)
	due := func(platforms ...string) []int64 {
		t.Helper()
		ids, err := db.DueAnswers(ctx, platforms, 100)
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	held := newConversation(t, db)  // oldest held by a live process
	ready := newConversation(t, db) // both left by a dead one
	appendAnswer(t, db, held.ID, "live", answerMsg("h1"))
	appendAnswer(t, db, ready.ID, "dead", answerMsg("r1"))
	appendAnswer(t, db, ready.ID, "dead", answerMsg("r2"))
	other, err := db.Conversation(ctx, "discord", "C1", "T1", false)
	if err != nil {
		t.Fatal(err)
	}
	appendAnswer(t, db, other.ID, "dead", answerMsg("d1"))
	if got := due("slack", "discord"); len(got) != 0 {
		t.Fatalf("due %v while their holders' claims live", got)
	}
	h2, _ := appendAnswer(t, clockAt(db, now.Add(30*time.Second)), held.ID, "live", answerMsg("h2"))
	if err := db.ReleaseAnswer(ctx, h2.ID, "live"); err != nil {
		t.Fatal(err)
	}
	clockAt(db, now.Add(61*time.Second)) // the dead claims lapsed; live renews its first
	if ok, err := db.RenewAnswer(ctx, answersOf(t, db, held.ID)[0].ID, "live", time.Minute); err != nil || !ok {
		t.Fatalf("renew: %v %v", ok, err)
	}
	if got := due("slack"); !slices.Equal(got, []int64{ready.ID}) {
		t.Fatalf("due %v; want only %d (its oldest answer may be claimed; %d's oldest is held)", got, ready.ID, held.ID)
	}
	if got := due("slack", "discord"); !slices.Equal(got, []int64{ready.ID, other.ID}) {
		t.Fatalf("due on both platforms %v", got)
	}
	if got := due(); len(got) != 0 {
		t.Fatalf("due on no platform: %v", got)
	}
	if _, err := db.DueAnswers(ctx, []string{"slack"}, 0); err == nil {
		t.Fatal("listed without a limit")
	}
}

// SQLite serves one process: at its start the claims a killed process
// held are cleared, and its answers may be claimed at once.
func testAnswersClearedAtStart(t *testing.T, db *DB) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	clockAt(db, now)
	conv := newConversation(t, db)
	a, _ := appendAnswer(t, db, conv.ID, "killed", answerMsg("left"))
	if err := db.ClearLeases(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, err := db.DueAnswers(t.Context(), []string{"slack"}, 10); err != nil || !slices.Equal(got, []int64{conv.ID}) {
		t.Fatalf("due after ClearLeases: %v %v", got, err)
	}
	if _, ok, err := db.ClaimAnswer(t.Context(), a.ID, "new", time.Minute); err != nil || !ok {
		t.Fatalf("claim after ClearLeases: %v %v", ok, err)
	}
}

// testAnswersReplicas: replicas claiming the answers a dead process left,
// all at once, claim each exactly once.
func testAnswersReplicas(t *testing.T, driver, dsn string) {
	dbs := openReplicas(t, driver, dsn, 3)
	old := time.Now().UTC().Add(-time.Hour)
	const n = 30
	var ids []int64
	for range n {
		conv := newConversation(t, dbs[0])
		a, _ := appendAnswer(t, clockAt(dbs[0], old), conv.ID, "dead", answerMsg("left"))
		ids = append(ids, a.ID)
	}
	dbs[0].setClock(nil)
	var mu sync.Mutex
	claimed := map[int64]int{}
	raceAll(t, 6, func(i int) error {
		db := dbs[i%len(dbs)]
		for _, id := range ids {
			_, ok, err := db.ClaimAnswer(t.Context(), id, fmt.Sprintf("replica-%d", i), time.Hour)
			if err != nil {
				return err
			}
			if ok {
				mu.Lock()
				claimed[id]++
				mu.Unlock()
			}
		}
		return nil
	})
	if len(claimed) != n {
		t.Fatalf("%d of %d answers claimed", len(claimed), n)
	}
	for id, c := range claimed {
		if c != 1 {
			t.Errorf("answer %d claimed %d times", id, c)
		}
	}
}
