package confirm

import (
	"context"
	"encoding/json"
	"strings"
	"time"
)

// Kinds of messages Airlock posts and keeps in sync (CardMessage.Kind):
// a batch's card, its copies and its pointer; a runbook run's message; a
// grant's notice.
const (
	CardMain    = "main"    // the card with buttons: in the thread, or in the approvals channel
	CardDM      = "dm"      // a copy of the card in an approver's DM
	CardPointer = "pointer" // the thread's "waiting for approval in #…" line; no buttons
	CardRun     = "run"     // a runbook run's message (RunID)
	CardGrant   = "grant"   // a grant's notice, with Revoke (GrantID)
	CardHome    = "home"    // a person's home view (Slack's Home tab; HomeID), in HomeChannel
)

// Surfaces a decision came from, recorded in its audit row's detail
// ("surface"): the card in the conversation's thread, the card posted in
// an approvals channel, an approver's DM copy, the terminal, or the edit
// form (an edit counts as the editor's allow).
const (
	SurfaceThread    = "thread"
	SurfaceApprovals = "approvals_channel"
	SurfaceDM        = "dm"
	SurfaceTerminal  = "terminal"
	SurfaceEdit      = "edit_modal"
	SurfaceWeb       = "web" // the web console's approval page
)

// CardMessage is one message Airlock posted for a batch (or, of kind
// CardRun, for a runbook run; of kind CardGrant, for a grant). A click
// counts only on a message of kind CardMain or CardDM of the button's
// batch.
type CardMessage struct {
	BatchID   string // kinds CardMain, CardDM, CardPointer
	RunID     string // kind CardRun
	GrantID   string // kind CardGrant
	HomeID    string // kind CardHome (HomeKey.ID)
	Kind      string
	Platform  string
	Channel   string
	Thread    string // "" for a top-level message
	Ref       string // the platform's reference (may list several messages, comma-separated)
	CreatedAt time.Time
	// Version is the batch's card version (CardVersion; the run's or the
	// grant's: SubjectVersion) read before the state the message shows
	// was loaded: the version it was rendered at.
	Version int64
}

// Subject is what a synced message shows: a batch, a runbook run or a
// grant. Each counts the changes of its state (its card version).
type Subject struct {
	Kind string // SubjectBatch, SubjectRun, SubjectGrant or SubjectHome
	ID   string
}

// Kinds of subjects.
const (
	SubjectBatch = "batch"
	SubjectRun   = "run"
	SubjectGrant = "grant"
	SubjectHome  = "home"
)

// HomeChannel is the channel of every home view's message: a home is no
// channel's, and a platform's limit on publishing home views holds them
// all (and only them).
const HomeChannel = "~home"

// HomeKey names a person's home view: their user id on a platform.
type HomeKey struct {
	Platform string
	User     string
}

// ID is the home's subject id, "<platform>:<user>".
func (k HomeKey) ID() string { return k.Platform + ":" + k.User }

// ParseHomeID reads a home's subject id.
func ParseHomeID(id string) (HomeKey, bool) {
	platform, user, ok := strings.Cut(id, ":")
	if !ok || platform == "" || user == "" {
		return HomeKey{}, false
	}
	return HomeKey{Platform: platform, User: user}, true
}

// HomeStore keeps the home views people opened: each is a card-sync
// message (kind CardHome, subject SubjectHome) rendered again whenever a
// request it lists changes.
type HomeStore interface {
	// OpenHome records that the person opened their home view: the home
	// and its message (Ref: the home's id) are stored once (opening again
	// changes nothing but the time).
	OpenHome(ctx context.Context, k HomeKey) error
	// OpenHomes lists the homes opened on a platform.
	OpenHomes(ctx context.Context, platform string) ([]HomeKey, error)
}

// Subject is the batch, run or grant the message shows.
func (m CardMessage) Subject() Subject {
	switch m.Kind {
	case CardRun:
		return Subject{Kind: SubjectRun, ID: m.RunID}
	case CardGrant:
		return Subject{Kind: SubjectGrant, ID: m.GrantID}
	case CardHome:
		return Subject{Kind: SubjectHome, ID: m.HomeID}
	}
	return Subject{Kind: SubjectBatch, ID: m.BatchID}
}

// EditCall is an approver's change of a waiting call's arguments, with
// the policy's verdict on the new arguments. It counts as the editor's
// allow.
type EditCall struct {
	BatchID string
	Key     string
	Args    json.RawMessage // the edited arguments, validated (the model's stay as they were)
	Summary string          // the read-back of the edited arguments
	By      string          // the editor
	// Revision is the revision of the arguments the editor's form showed:
	// an edit at another revision changes nothing (Stale); one at the
	// current revision makes the next.
	Revision int
	// The policy's verdict on the edited arguments replaces the call's.
	Approvals int
	Restrict  []Approvers
	Reasons   []Reason
	Grantable bool
	Risk      Risk
	// Hold stores the edit without counting it as the editor's allow:
	// the call goes on waiting (a critical call, whose Allow needs its
	// confirmation phrase typed for the edited arguments).
	Hold bool
	// Assurance, Credential and Need are as in Decide, for the editor's
	// vote (an edit on the web console's page).
	Assurance  Assurance
	Credential string
	Need       Assurance
}

// RunArgs are the arguments a call runs with: an approver's edit, else
// the model's.
func (c Call) RunArgs() json.RawMessage {
	if len(c.EditedArgs) > 0 {
		return c.EditedArgs
	}
	return c.Args
}

// Audit kinds of routing, escalation, extend and edit.
const (
	AuditExtended  AuditKind = "extended"    // a card's deadline was pushed (detail: until)
	AuditEscalated AuditKind = "escalated"   // an escalation step fired (detail: step)
	AuditEdited    AuditKind = "call_edited" // an approver changed a call's arguments (detail: before, after, voided votes)
)

// CardStore is what the bot needs of a batch's card: the messages posted
// for it, its one extend and the edits of its calls. Each state change is
// one conditional write; the affected-row count decides who won.
type CardStore interface {
	// AddCardMessage remembers a message posted for a batch.
	AddCardMessage(ctx context.Context, m CardMessage) error
	// CardMessages lists a batch's messages, oldest first.
	CardMessages(ctx context.Context, batchID string) ([]CardMessage, error)
	// ExtendBatch pushes a pending batch's deadline, and its pending
	// calls', to until, once per batch (audited extended; reminders may
	// fire again); false when it was extended before, is no longer
	// pending, or expired already at the store's clock.
	ExtendBatch(ctx context.Context, batchID, by string, until time.Time) (bool, error)
	// EditCall stores an approver's arguments beside the model's (which
	// are never changed), with the new read-back and verdict, voids the
	// call's earlier approvals, and records the editor's allow as in
	// Decide, in one transaction and only while the call is pending and
	// the store's clock is before its expiry (else Won is false). Audited
	// call_edited with both arguments and the voided votes.
	EditCall(ctx context.Context, e EditCall) (DecideResult, error)
}
