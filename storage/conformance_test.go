package storage

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock/confirm"
)

// runConformance runs the confirm.Store contract against a fresh database
// from open for every test. Each test lives in the _test.go file beside the
// code it covers (batches_test.go for batches.go, and so on).
func runConformance(t *testing.T, open func(t *testing.T) *DB) {
	tests := []conformanceTest{
		{"ConversationGetOrCreate", testConversationGetOrCreate},
		{"MessagesOrderAndBytes", testMessagesOrderAndBytes},
		{"ConcurrentAppend", testConcurrentAppend},
		{"CreateBatchRoundTrip", testCreateBatchRoundTrip},
		{"CreateBatchRollsBack", testCreateBatchRollsBack},
		{"DecideWinsOnce", testDecideWinsOnce},
		{"DecideAfterExpiry", testDecideAfterExpiry},
		{"LastDecisionFlipsBatch", testLastDecisionFlipsBatch},
		{"DecideAll", testDecideAll},
		{"DecideAllRefusesAQuorumAllow", testDecideAllRefusesAQuorumAllow},
		{"ResolvePendingExpiry", testResolvePendingExpiry},
		{"ResolvePendingAbandon", testResolvePendingAbandon},
		{"ClaimRunComplete", testClaimRunComplete},
		{"RecoverRunning", testRecoverRunning},
		{"AuditEvents", testAuditEvents},
		{"AuditAppendOnly", testAuditAppendOnly},
		{"AuditChainVerifies", testAuditChainVerifies},
		{"AuditChainEditedAndRehashed", testAuditChainEditedAndRehashed},
		{"AuditChainInserted", testAuditChainInserted},
		{"AuditChainConcurrent", testAuditChainConcurrent},
		{"AuditExportFilters", testAuditExportFilters},
		{"AuditChainTruncatedAfterCheckpoint", testAuditChainTruncatedAfterCheckpoint},
		{"PendingBatch", testPendingBatch},
		{"BatchesInOrder", testBatchesInOrder},
		{"SetCardRef", testSetCardRef},
		{"OpenBatches", testOpenBatches},
		{"MigrateIdempotent", testMigrateIdempotent},
		{"TimeRoundTrip", testTimeRoundTrip},
		{"RaceDecideSameCall", testRaceDecideSameCall},
		{"RaceDecideAllCalls", testRaceDecideAllCalls},
		{"RaceClaim", testRaceClaim},
		{"MarkEventOnce", testMarkEventOnce},
		{"Leases", testLeases},
		{"RaceLease", testRaceLease},
		{"Reminders", testReminders},
		{"RecoverOneBatch", testRecoverOneBatch},
		{"UnansweredConversations", testUnanswered},
		{"ConversationDM", testConversationDM},
		{"Reasons", testReasons},
		{"Quorum", testQuorum},
		{"QuorumDeny", testQuorumDeny},
		{"QuorumAssurance", testQuorumAssurance},
		{"QuorumExpiry", testQuorumExpiry},
		{"RaceQuorum", testRaceQuorum},
		{"RaceSameApprover", testRaceSameApprover},
		{"Grants", testGrants},
		{"PauseDecisions", testPauseDecisions},
		{"AbandonGranted", testAbandonGranted},
		{"ExactArgsInAudit", testExactArgsInAudit},
		{"PendingInChannel", testPendingInChannel},
		{"UnknownCalls", testUnknownCalls},
		{"CountTurn", testCountTurn},
		{"RaceCountTurn", testRaceCountTurn},
		{"ClockSync", testClockSync},
		{"OneClock", testOneClock},
		{"OneReadingPerTransaction", testOneReadingPerTransaction},
		{"OutboxWithAudit", testOutboxWithAudit},
		{"OutboxNoWebhooks", testOutboxNoWebhooks},
		{"OutboxEvents", testOutboxEvents},
		{"OutboxGatewaySession", testOutboxGatewaySession},
		{"OutboxClaimsInOrder", testOutboxClaimsInOrder},
		{"OutboxClaimExpiry", testOutboxClaimExpiry},
	}
	for _, tc := range slices.Concat(tests, chainTamperTests, routeTests, integrityTests, boundsTests, checkedTests, runbookTests, checkpointTests, retentionTests, cardSyncTests, previewTests, messageSyncTests, inboxTests, answerTests, callbackTests, questionTests, webTests, homeTests) {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, open(t))
		})
	}
}

var threadSeq atomic.Int64

func newConversation(t *testing.T, db *DB) confirm.Conversation {
	t.Helper()
	c, err := db.Conversation(t.Context(), "slack", "C1", fmt.Sprintf("thread-%d", threadSeq.Add(1)), false)
	if err != nil {
		t.Fatalf("Conversation: %v", err)
	}
	return c
}

// newBatch stores a batch of one call per decision (key "k<i>", position i)
// in a new conversation, expiring at expires.
func newBatch(t *testing.T, db *DB, expires time.Time, decisions ...confirm.DecisionStatus) *confirm.Batch {
	t.Helper()
	return batchIn(t, db, newConversation(t, db).ID, expires, decisions...)
}

// batchIn is newBatch in an existing conversation.
func batchIn(t *testing.T, db *DB, convID int64, expires time.Time, decisions ...confirm.DecisionStatus) *confirm.Batch {
	t.Helper()
	b := &confirm.Batch{ConversationID: convID, RequestedBy: "U-author", ExpiresAt: expires}
	for i, d := range decisions {
		b.Calls = append(b.Calls, confirm.Call{
			Key:      fmt.Sprintf("k%d", i),
			Position: i,
			CallID:   fmt.Sprintf("call_%d", i),
			Tool:     "deploy",
			Args:     json.RawMessage(fmt.Sprintf(`{"n": %d}`, i)),
			Summary:  fmt.Sprintf("deploy %d", i),
			Flagged:  d == confirm.DecisionPending,
			Decision: d,
		})
	}
	if err := db.CreateBatch(t.Context(), b, confirm.Message{Role: "assistant", Body: json.RawMessage(`{"calls":[]}`)}); err != nil {
		t.Fatalf("CreateBatch: %v", err)
	}
	return b
}

func loadBatch(t *testing.T, db *DB, id string) *confirm.Batch {
	t.Helper()
	return load(t, "Batch", db.Batch, id)
}

// load returns what get (a store method, named what) loads for id,
// failing the test on an error.
func load[T any](t *testing.T, what string, get func(ctx context.Context, id string) (T, error), id string) T {
	t.Helper()
	v, err := get(t.Context(), id)
	if err != nil {
		t.Fatalf("%s(%s): %v", what, id, err)
	}
	return v
}

func callByKey(t *testing.T, b *confirm.Batch, key string) confirm.Call {
	t.Helper()
	for _, c := range b.Calls {
		if c.Key == key {
			return c
		}
	}
	t.Fatalf("batch %s has no call %q", b.ID, key)
	return confirm.Call{}
}

func decide(t *testing.T, db *DB, d confirm.Decide) confirm.DecideResult {
	t.Helper()
	res, err := db.Decide(t.Context(), d)
	if err != nil {
		t.Fatalf("Decide(%+v): %v", d, err)
	}
	return res
}

func auditKinds(t *testing.T, db *DB, convID int64) []string {
	t.Helper()
	evs, err := db.AuditEvents(t.Context(), confirm.AuditFilter{ConversationID: convID})
	if err != nil {
		t.Fatalf("AuditEvents: %v", err)
	}
	var kinds []string
	for _, e := range evs {
		kinds = append(kinds, string(e.Kind)+":"+e.CallKey)
	}
	return kinds
}

func later() time.Time { return time.Now().Add(time.Hour) }

// clockAt sets db's clock (WithClock) to t and returns db, so a test
// decides the time a store call stamps and compares with.
func clockAt(db *DB, t time.Time) *DB {
	db.setClock(func() time.Time { return t })
	return db
}
