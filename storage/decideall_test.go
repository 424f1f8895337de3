package storage

import (
	"testing"

	"github.com/airlockhq/airlock/confirm"
)

// DecideAll decides, in one transaction, every call still pending at the
// revision its decider saw; one decided meanwhile or edited since is left
// as it is; the batch is decided when nothing waits any more.
func testDecideAll(t *testing.T, db *DB) {
	ctx := t.Context()
	b := newBatch(t, db, later(), confirm.DecisionPending, confirm.DecisionPending, confirm.DecisionPending, confirm.DecisionPending)
	decide(t, db, confirm.Decide{BatchID: b.ID, Key: "k2", Status: confirm.DecisionDenied, By: "U-other"}) // decided meanwhile
	all := func(rev3 int) []confirm.Decide {
		var ds []confirm.Decide
		for i, key := range []string{"k0", "k1", "k2", "k3"} {
			d := confirm.Decide{BatchID: b.ID, Key: key, Status: confirm.DecisionAllowed, By: "U-alice", Surface: confirm.SurfaceThread}
			if i == 3 {
				d.Revision = rev3
			}
			ds = append(ds, d)
		}
		return ds
	}
	res, err := db.DecideAll(ctx, all(7)) // k3 seen at another revision
	if err != nil {
		t.Fatal(err)
	}
	if got := []bool{res.Calls[0].Won, res.Calls[1].Won, res.Calls[2].Won, res.Calls[3].Won}; got[0] != true || got[1] != true || got[2] || got[3] {
		t.Fatalf("won %v, want k0 and k1 only", got)
	}
	if !res.Calls[3].Stale || res.BatchDecided {
		t.Fatalf("k3 not stale or the batch decided with k3 waiting: %+v", res)
	}
	got := loadBatch(t, db, b.ID)
	for i, want := range []confirm.DecisionStatus{confirm.DecisionAllowed, confirm.DecisionAllowed, confirm.DecisionDenied, confirm.DecisionPending} {
		if got.Calls[i].Decision != want {
			t.Fatalf("call %d is %s, want %s", i, got.Calls[i].Decision, want)
		}
	}
	if got.Calls[2].DecidedBy != "U-other" || got.Calls[0].DecidedBy != "U-alice" {
		t.Fatalf("deciders %q %q", got.Calls[0].DecidedBy, got.Calls[2].DecidedBy)
	}

	// Again at the right revision: only k3 is left to decide, and with it
	// the batch is decided in the same transaction.
	res, err = db.DecideAll(ctx, all(0))
	if err != nil {
		t.Fatal(err)
	}
	if res.Calls[0].Won || res.Calls[1].Won || !res.Calls[3].Won || !res.BatchDecided || res.Batch == nil || res.Batch.Status != confirm.BatchDecided {
		t.Fatalf("second DecideAll: %+v", res)
	}
	events, err := db.AuditEvents(ctx, confirm.AuditFilter{ConversationID: b.ConversationID})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range events {
		if e.Kind == confirm.AuditDecision && e.Actor == "U-alice" && e.BatchID == b.ID {
			n++
		}
	}
	if n != 3 {
		t.Fatalf("%d decisions audited for the clicker, want 3", n)
	}
}

// An allow of a call needing several approvals is one vote, not a
// decision: DecideAll refuses it and changes nothing.
func testDecideAllRefusesAQuorumAllow(t *testing.T, db *DB) {
	ctx := t.Context()
	b := &confirm.Batch{ConversationID: newConversation(t, db).ID, RequestedBy: "U-author", ExpiresAt: later(), Calls: []confirm.Call{
		{Key: "a", Position: 0, Tool: "deploy", Args: []byte(`{}`), Flagged: true},
		{Key: "q", Position: 1, Tool: "deploy", Args: []byte(`{}`), Flagged: true, Approvals: 2},
	}}
	if err := db.CreateBatch(ctx, b, confirm.Message{Role: "assistant", Body: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	_, err := db.DecideAll(ctx, []confirm.Decide{
		{BatchID: b.ID, Key: "a", Status: confirm.DecisionAllowed, By: "U"},
		{BatchID: b.ID, Key: "q", Status: confirm.DecisionAllowed, By: "U"},
	})
	if err == nil {
		t.Fatal("a quorum call allowed by one DecideAll")
	}
	if got := loadBatch(t, db, b.ID); got.Calls[0].Decision != confirm.DecisionPending {
		t.Fatalf("the refused DecideAll decided %s", got.Calls[0].Key)
	}
}
