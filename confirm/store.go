package confirm

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// Storage errors. Classify with errors.Is.
var (
	// ErrNotFound: no such conversation, batch or call.
	ErrNotFound = errors.New("not found")
	// ErrGrantInactive: a grant a batch was planned with was revoked or
	// expired before the batch was stored.
	ErrGrantInactive = errors.New("grant no longer active")
	// ErrUnavailable: the database could not be reached or written (a
	// connection refused or lost, a server restarting, a read-only or full
	// file). Nothing was recorded; trying again later may work.
	ErrUnavailable = errors.New("the database is unavailable")
)

// Conversation is one chat thread the bot talks in.
type Conversation struct {
	ID        int64
	Platform  string
	Channel   string
	Thread    string
	DM        bool // a direct message: served only by a "dm" channels entry
	CreatedAt time.Time
}

// Message is one stored message of a conversation, in order. Body is opaque
// to storage (the bot stores model messages as JSON, verbatim).
type Message struct {
	ConversationID int64
	Seq            int // 1, 2, 3... per conversation
	Role           string
	Body           json.RawMessage
	CreatedAt      time.Time
}

// BatchStatus is where a paused reply stands.
type BatchStatus string

const (
	BatchPending BatchStatus = "pending" // some call waits for a decision
	BatchDecided BatchStatus = "decided" // every call decided, not yet claimed to run
	BatchRunning BatchStatus = "running" // claimed by one worker
	BatchDone    BatchStatus = "done"    // results appended to the conversation
)

// DecisionStatus is the decision on one call.
type DecisionStatus string

const (
	DecisionPending         DecisionStatus = "pending"
	DecisionAllowed         DecisionStatus = "allowed"           // a person said yes
	DecisionAllowedByPolicy DecisionStatus = "allowed_by_policy" // not flagged; decided at pause time
	DecisionDenied          DecisionStatus = "denied"            // a person said no, or the pause was abandoned
	DecisionExpired         DecisionStatus = "expired"           // nobody decided in time
	DecisionInvalid         DecisionStatus = "invalid"           // arguments failed validation; answered to the model
	DecisionAllowedByGrant  DecisionStatus = "allowed_by_grant"  // a grant covered it; decided at pause time
	DecisionDeniedByRule    DecisionStatus = "denied_by_rule"    // a rule refused it; decided at pause time
)

// Allowed reports whether the call may run.
func (d DecisionStatus) Allowed() bool {
	return d == DecisionAllowed || d == DecisionAllowedByPolicy || d == DecisionAllowedByGrant
}

// RunStatus is where the run of a call stands.
type RunStatus string

const (
	RunNotStarted RunStatus = "not_started"
	RunRunning    RunStatus = "running"
	RunSucceeded  RunStatus = "succeeded"
	RunFailed     RunStatus = "failed"
	RunUnknown    RunStatus = "unknown" // the process died mid-run; never run again automatically
)

// Batch is a paused model reply: its calls wait for decisions.
type Batch struct {
	ID             string // opaque, random
	ConversationID int64
	MessageSeq     int    // the stored assistant message holding the calls
	RequestedBy    string // platform user id of the turn's author
	Status         BatchStatus
	CardRef        string // the platform's reference of the posted card
	ClaimedBy      string
	CreatedAt      time.Time
	ExpiresAt      time.Time
	// ExtendedBy and ExtendedAt record the card's one Extend (ExpiresAt is
	// then the new deadline).
	ExtendedBy string
	ExtendedAt *time.Time
	// Intro is the model's words that came with the calls, as its card
	// shows them; nil when not stored (a batch from an older release: the
	// words are in the assistant message at MessageSeq).
	Intro *string
	// Escalated lists the escalation steps that fired, in order.
	Escalated []int
	Calls     []Call // in the model's order
	// CopiesPending: the card was recorded, and its copies (the thread's
	// pointer, DM copies) not yet all posted (SetCardRefWithCopies).
	CopiesPending bool
	// ClientLeftAt is when the MCP client whose call the batch is stopped
	// waiting for it, while it was pending (MarkClientLeft); nil if it did
	// not.
	ClientLeftAt *time.Time
}

// Call is one call of a batch.
type Call struct {
	BatchID  string
	Key      string
	Position int
	CallID   string // as the model gave it
	Tool     string
	Args     json.RawMessage // exact bytes from the model
	Summary  string          // the read-back a person approves
	Flagged  bool            // a person must decide (the policy asked)
	// Reasons say why a person is asked, or which rule refused the call
	// (stored as JSON).
	Reasons []Reason
	// Approvals is how many distinct people must allow a flagged call.
	Approvals int
	// Restrict narrows who may decide: a decider must belong to every set
	// (stored as JSON). Empty: the channel's approvers.
	Restrict []Approvers
	// Grantable: an "Allow for <duration>" may allow it and grant later
	// equal-tool calls.
	Grantable bool
	// Risk is the tier of a flagged call (medium unless its tool or a rule
	// said); "" for calls nobody was asked about, and for calls stored
	// before tiers existed.
	Risk      Risk
	Decision  DecisionStatus
	DecidedBy string // platform user id; "airlock", "policy", "rule:<name>", "grant:<id>"
	// DecidedVia is how the decider proved who they are (a decision on
	// the web console's page); "" for a chat click.
	DecidedVia  Assurance
	DecidedAt   *time.Time
	DenyMessage string // what the model is told for a deny not made by a person (moved on, rule, invalid...)
	// DenyReason is a person's own words with a deny, as data (capped); the
	// model's message is built from it.
	DenyReason string
	// GrantID is the grant that allowed the call (allowed_by_grant).
	GrantID string
	// Votes are the approvals recorded so far of a call needing more
	// than one, oldest first. A call needing one keeps none: its one
	// approval decides it, and DecidedBy says whose.
	Votes          []Vote
	Run            RunStatus
	Result         string
	IdempotencyKey string // <batch id>/<call key>
	ExpiresAt      time.Time
	// EditedArgs are an approver's arguments (see RunArgs); Args keep the
	// model's bytes. Summary is then the edited call's read-back.
	EditedArgs json.RawMessage
	EditedBy   string
	EditedAt   *time.Time
	// Revision counts the edits of the call's arguments (0: the model's).
	// Every button, form and view of the call carries the revision it
	// showed (RefAt); a decision made at another revision changes nothing.
	Revision int
	// CheckedBy and CheckedAt record the person who marked an unknown
	// outcome checked (see CheckStore); nil: not checked.
	CheckedBy string
	CheckedAt *time.Time
	// NoticeRef is the platform's reference of the thread line that
	// announced the call's unknown outcome ("" when none was posted).
	NoticeRef string
	// Preview is the call's preview (tools[].preview); State "" when none.
	Preview Preview
}

// Vote is one person's approval of a call.
type Vote struct {
	By string
	At time.Time
	// Via is how the voter proved who they are (a vote on the web
	// console's page); "" for a chat click.
	Via Assurance
}

// Decide is one person's decision on one call.
type Decide struct {
	BatchID string
	Key     string
	Status  DecisionStatus // DecisionAllowed or DecisionDenied
	By      string         // platform user id
	Message string         // deny message for the model (may be empty: DefaultDenyMessage)
	Reason  string         // a deny's reason in the person's words (may be empty)
	Surface string         // where the click came from (SurfaceThread, ...), for the audit
	// Assurance is how the decider proved who they are, for the audit,
	// where it is known (a decision on the web console's page); "" for a
	// chat click.
	Assurance Assurance
	// Credential is the passkey's id of a passkey vote, for the audit.
	Credential string
	// Need is the assurance a vote needs to count toward the call's
	// quorum (confirmation.step_up, as configured now): votes stored with
	// less (cast before the setting changed) are not counted, and their
	// voters may vote again. An allow made with less is refused.
	Need Assurance
	// Revision is the revision of the call's arguments the decider saw: a
	// decision at another revision changes nothing (DecideResult.Stale).
	Revision int
	// Grant, with an allow that decides the call, is created in the same
	// transaction (ConversationID comes from the batch, CreatedAt from
	// the store's clock; the caller sets ID, Tool, CreatedBy, ExpiresAt).
	Grant *Grant
}

// DecideResult says what a Decide did.
type DecideResult struct {
	Won          bool // this decision counted: it decided the call, or added a new approval
	Decided      bool // the call left pending (allowed at its last needed approval, or denied)
	BatchDecided bool // and with it every call of the batch is decided
	Votes        int  // distinct approvals recorded (after this one)
	Required     int  // approvals the call needs
	AlreadyVoted bool // this person had approved before; nothing changed
	// Stale: the call's arguments were edited since the decider looked
	// (Decide.Revision is not the call's); nothing changed.
	Stale bool
	// Batch is, when BatchDecided, the batch as the deciding transaction
	// left it (decided, every call decided), read in that transaction: a
	// decided batch changes only once claimed, so its runner need not load
	// it again.
	Batch *Batch
}

// DecideAllResult is what a DecideAll did: per decision, in order, whether
// it decided its call (Won) or found it edited since (Stale) or closed
// (neither); and whether the batch is now decided (Batch as the
// transaction left it).
type DecideAllResult struct {
	Calls        []DecideResult
	BatchDecided bool
	Batch        *Batch
}

// Grant lets later calls of one tool in one conversation run without a
// card until it expires or is revoked. It covers only turns of its
// Requester (or of an approver of the channel), and a call whose verdict
// restricts who may decide only when its creator is admitted by every
// restriction (checked when the grant would be used).
type Grant struct {
	ID             string
	ConversationID int64
	Tool           string
	CreatedBy      string
	// CreatorRoles are the creator's platform roles when they made it
	// (Discord), for the restrictions a later call's rules name.
	CreatorRoles []string
	// Requester is who asked for the call whose "Allow for" made the grant:
	// the grant covers their later turns of the thread.
	Requester string
	CreatedAt time.Time
	ExpiresAt time.Time
	RevokedBy string
	RevokedAt *time.Time
	BatchID   string // the call whose "Allow for" created it
	CallKey   string
	NoticeRef string // the platform's reference of the grant's notice (with Revoke)
	// ToolDef is the definition of the tool the grant was made for (see
	// tools.Definition): a grant whose tool's definition changed since
	// covers nothing. "" for grants stored before it was recorded.
	ToolDef string
}

// Active reports whether the grant covers calls at now.
func (g Grant) Active(now time.Time) bool { return g.RevokedAt == nil && now.Before(g.ExpiresAt) }

// GrantFilter selects grants; zero fields select everything.
type GrantFilter struct {
	ConversationID int64
	ActiveAt       time.Time // non-zero: only grants active then
}

// AuditKind names an audit event.
type AuditKind string

const (
	AuditToolCall        AuditKind = "tool_call"
	AuditApprovalRequest AuditKind = "approval_request"
	AuditDecision        AuditKind = "decision"
	AuditRejectedClick   AuditKind = "rejected_click"
	AuditToolResult      AuditKind = "tool_result"
	AuditApproval        AuditKind = "approval" // one person's allow of a call that needs more than one
	AuditGrantCreated    AuditKind = "grant_created"
	AuditGrantUsed       AuditKind = "grant_used"
	AuditGrantRevoked    AuditKind = "grant_revoked"
	// AuditForeignRow is the row Airlock writes when it finds the audit
	// chain's head at a row it did not write (see storage's AuditMAC).
	AuditForeignRow AuditKind = "audit_foreign_row"
)

// AuditEvent is one append-only audit row.
type AuditEvent struct {
	ID             int64
	At             time.Time
	Kind           AuditKind
	ConversationID int64
	BatchID        string
	CallKey        string
	Tool           string
	Actor          string // platform user id, or "airlock"
	Detail         string // JSON: args, decision, outcome...
}

// AuditFilter selects audit events; zero fields select everything.
type AuditFilter struct {
	ConversationID int64
	BatchID        string // with ConversationID: only the rows of this request
	Since          time.Time
}

// Store is what the bot needs from storage: the roles below, each a
// consumer's whole need (a job or command takes only its role). Every
// state change is one conditional UPDATE; the affected-row count decides
// who won. Each transaction stamps its times from one reading of the
// store's clock (the database's), so no caller passes the time.
type Store interface {
	ConversationStore
	BatchStore
	DecisionStore
	RunStore
	GrantStore
	SweepStore
	CoordinationStore
	CardStore
	CardSyncStore
	HomeStore
	AuditStore
	CheckStore
	PreviewStore
	InboxStore
	AnswerStore
	CallbackStore
	QuestionStore
	WebStore
	PasskeyStore

	Ping(ctx context.Context) error
	Close() error
}

// ConversationStore holds the threads the bot talks in and their messages.
type ConversationStore interface {
	// Conversation returns the conversation of a thread, creating it
	// (with dm recorded at creation; an existing conversation keeps its own).
	Conversation(ctx context.Context, platform, channel, thread string, dm bool) (Conversation, error)
	// FindConversation returns the conversation of a thread; ErrNotFound
	// when the thread holds none.
	FindConversation(ctx context.Context, platform, channel, thread string) (Conversation, error)
	ConversationByID(ctx context.Context, id int64) (Conversation, error)
	// AppendMessages appends messages in order, assigning Seq.
	AppendMessages(ctx context.Context, conversationID int64, msgs ...Message) error
	Messages(ctx context.Context, conversationID int64) ([]Message, error)
	// Message loads one message; ErrNotFound when none.
	Message(ctx context.Context, conversationID int64, seq int) (Message, error)
	// UnansweredConversations lists conversations whose newest message is
	// tool results the model never answered.
	UnansweredConversations(ctx context.Context) ([]int64, error)
}

// BatchStore stores paused replies and looks them up.
type BatchStore interface {
	// CreateBatch stores the assistant message holding the calls, the batch
	// and its calls, and the audit events, in one transaction: tool_call
	// per call (with its reasons), approval_request when the batch is
	// pending, a decision event for each call decided at pause time by a
	// rule (denied_by_rule) and grant_used for each call a grant allowed.
	// It sets b.MessageSeq and b.CreatedAt (the store's clock; the
	// caller's CreatedAt is not used). The grant of each call a grant
	// allowed is checked active (not revoked, not expired) in that
	// transaction: when one is not, nothing is stored and the error is
	// ErrGrantInactive (the caller plans again).
	CreateBatch(ctx context.Context, b *Batch, assistant Message) error
	// Batch loads a batch with its calls; ErrNotFound when none.
	Batch(ctx context.Context, id string) (*Batch, error)
	// PendingBatch returns the conversation's batch in status pending;
	// ErrNotFound when none.
	PendingBatch(ctx context.Context, conversationID int64) (*Batch, error)
	// PendingBatches lists the ids of the conversation's batches in
	// status pending, oldest first.
	PendingBatches(ctx context.Context, conversationID int64) ([]string, error)
	SetCardRef(ctx context.Context, batchID, ref string) error
	// SetCardRefWithCopies is SetCardRef of a card that will have copies
	// (a pointer in the thread, DM copies): in the same write the batch
	// is marked as having copies pending, until CopiesPosted.
	SetCardRefWithCopies(ctx context.Context, batchID, ref string) error
	// CopiesPosted clears the mark of SetCardRefWithCopies: every copy of
	// the card was posted (or given up).
	CopiesPosted(ctx context.Context, batchID string) error
	// OpenBatches lists the conversation's batches that are decided or
	// running (not yet done), oldest first.
	OpenBatches(ctx context.Context, conversationID int64) ([]string, error)
	// PendingInChannel counts the pending batches of the conversations in
	// a channel of a platform (all its threads).
	PendingInChannel(ctx context.Context, platform, channel string) (int, error)
	// BindableBatch is the newest batch of the conversation whose one call
	// is of tool with exactly args (bytes) and still live: pending, or
	// allowed by people or a grant and not started; "" when none (a
	// gateway request's binding).
	BindableBatch(ctx context.Context, conversationID int64, tool string, args []byte) (string, error)
	// MarkClientLeft records that the MCP client stopped waiting for the
	// pending batch (once: false when it was recorded already, or the
	// batch is no longer pending).
	MarkClientLeft(ctx context.Context, batchID string) (bool, error)
	// AskedBatch is the newest batch of the conversation whose one call is
	// of tool with exactly args and was put to a person, whatever became
	// of it; "" when none (an MCP call's retry).
	AskedBatch(ctx context.Context, conversationID int64, tool string, args []byte) (string, error)
	// PendingInThreads counts the pending batches of the channel's
	// conversations whose thread begins with prefix (a gateway client's
	// sessions).
	PendingInThreads(ctx context.Context, platform, channel, prefix string) (int, error)
	// UnknownCalls lists the conversation's calls whose run outcome is
	// unknown and that nobody marked checked yet, oldest first.
	UnknownCalls(ctx context.Context, conversationID int64) ([]Call, error)
	// BatchesIn lists ids of batches in the status, oldest first.
	BatchesIn(ctx context.Context, status BatchStatus) ([]string, error)
	// UncardedBatches lists pending batches whose card was never recorded
	// (no SetCardRef), and batches of any status whose copies are still
	// pending (SetCardRefWithCopies and no CopiesPosted), oldest first.
	UncardedBatches(ctx context.Context) ([]string, error)
}

// Callback is where an agent outside Airlock asked to be told of its
// approval's decision (the gateway's callback_url).
type Callback struct {
	BatchID        string
	URL            string
	Client         string // the gateway client that asked
	ConversationID int64
}

// CallbackStore holds the callbacks asked for: once a batch is decided,
// its callbacks are queued in the events outbox (each once, whatever the
// replicas), which delivers them signed, retried until accepted.
type CallbackStore interface {
	// AddCallback registers a callback of the batch; adding one again is
	// a no-op.
	AddCallback(ctx context.Context, c Callback) error
	// DueCallbacks lists up to limit callbacks of batches no longer
	// pending that are not queued yet, oldest first.
	DueCallbacks(ctx context.Context, limit int) ([]Callback, error)
	// QueueCallback queues body for the callback in the outbox, to target,
	// and marks it queued, in one transaction: false when it was queued
	// already.
	QueueCallback(ctx context.Context, c Callback, target string, body []byte) (bool, error)
}

// DecisionStore decides calls: a person's decision, expiry, abandon.
type DecisionStore interface {
	// Decide applies one person's decision to a call, only while it is
	// pending and the store's clock is before its expiry, and records it
	// in the audit. A deny decides the call at once. On a call needing
	// more than one approval an allow is recorded as a vote per (call,
	// person), unique; the call becomes allowed in the same transaction
	// as its Approvals-th distinct vote. A call needing one is allowed by
	// its first, recorded as its decision (no vote is kept). When it
	// decides the last pending call, the batch goes from pending to
	// decided. With d.Grant, an allow that decides the call also stores
	// the grant (audited grant_created).
	Decide(ctx context.Context, d Decide) (DecideResult, error)
	// DecideAll takes the one-decision decisions of an Allow all or Deny
	// all, all calls of one batch, in one transaction (see DecideAllResult).
	DecideAll(ctx context.Context, ds []Decide) (DecideAllResult, error)
	// ExpirePending decides every still-pending call of a pending batch
	// expired, with message, whatever the expiry, and takes the batch to
	// decided. It returns how many calls it decided; zero when the batch
	// was no longer pending.
	ExpirePending(ctx context.Context, batchID, by, message string) (int, error)
	// AbandonPending denies every still-pending call of a pending batch
	// with message (the user moved on), and the calls allowed earlier
	// that have not started too: an abandoned reply runs nothing. It
	// takes the batch to decided and returns how many calls it decided;
	// zero when the batch was no longer pending.
	AbandonPending(ctx context.Context, batchID, by, message string) (int, error)
}

// RunStore claims decided batches and records the runs of their calls.
type RunStore interface {
	// ClaimBatch takes a batch from decided to running for worker; only
	// one caller wins.
	ClaimBatch(ctx context.Context, batchID, worker string) (bool, error)
	// StartRun takes a call's run from not_started to running; false when
	// it was not in not_started (it ran, or is running elsewhere).
	StartRun(ctx context.Context, batchID, key string) (bool, error)
	// FinishRun takes a call's run from running to succeeded or failed,
	// storing the result, and records the tool_result audit event.
	FinishRun(ctx context.Context, batchID, key string, status RunStatus, result string) error
	// CompleteBatch appends the tool-results message and takes the batch
	// from running to done, in one transaction; false when not running.
	CompleteBatch(ctx context.Context, batchID string, results Message) (bool, error)
	// RecoverRunning marks the running calls of the given batches as
	// unknown (the worker running them died) and returns the batch ids
	// touched.
	RecoverRunning(ctx context.Context, batchIDs ...string) ([]string, error)
	// ReleaseBatch takes a batch from running back to decided (a worker
	// that died); used at start-up recovery.
	ReleaseBatch(ctx context.Context, batchID string) error
}

// GrantStore holds the grants an "Allow for" makes.
type GrantStore interface {
	// ActiveGrants lists the grants of the conversation for the tool that
	// are active at the store's clock, newest first.
	ActiveGrants(ctx context.Context, conversationID int64, tool string) ([]Grant, error)
	// Grant loads one grant; ErrNotFound when none.
	Grant(ctx context.Context, id string) (*Grant, error)
	// Grants lists grants, newest first.
	Grants(ctx context.Context, f GrantFilter) ([]Grant, error)
	// RevokeGrant revokes a grant not yet revoked (audited grant_revoked);
	// false when it was already revoked or does not exist.
	RevokeGrant(ctx context.Context, id, by string) (bool, error)
	// SetGrantNoticeRef records where the grant's notice was posted.
	SetGrantNoticeRef(ctx context.Context, id, ref string) error
}

// SweepStore finds the pending batches that are due: expired, to remind,
// to escalate. Replicas race on the marks: one wins.
type SweepStore interface {
	// ExpiredBatches lists pending batches with a pending call past its
	// expiry at the store's clock.
	ExpiredBatches(ctx context.Context) ([]string, error)
	// DueReminders lists pending batches not yet reminded that expire
	// after the store's clock and at or before due; MarkReminded records
	// the reminder once (first caller wins).
	DueReminders(ctx context.Context, due time.Time) ([]string, error)
	MarkReminded(ctx context.Context, batchID string) (bool, error)
	// DueEscalations lists pending batches created at or before
	// pausedBefore for which step has not fired.
	DueEscalations(ctx context.Context, step int, pausedBefore time.Time) ([]string, error)
	// MarkEscalated records that step fired for a pending batch (audited
	// escalated); false when it had fired already or the batch is no
	// longer pending. Replicas race on it: one wins.
	MarkEscalated(ctx context.Context, batchID string, step int) (bool, error)
}

// CoordinationStore is what replicas share so they act once: leases, turn
// counts, platform event ids.
type CoordinationStore interface {
	// AcquireLease takes or renews holder's lease on key for ttl from the
	// store's clock; false while another holder's lease is live. Several
	// replicas use it so a conversation's turns never run on two at once.
	AcquireLease(ctx context.Context, key, holder string, ttl time.Duration) (bool, error)
	ReleaseLease(ctx context.Context, key, holder string) error
	// CountTurn records one turn of a user of a platform at the store's
	// clock and returns how many of that user's turns fall in the window
	// up to it, this one included. Rows older than the window may be
	// pruned. Replicas share the count.
	CountTurn(ctx context.Context, platform, user string, window time.Duration) (int, error)
	// MarkEvent records a platform event id and reports whether this is
	// the first time it was seen (retried deliveries start no second turn).
	MarkEvent(ctx context.Context, platform, eventID string) (bool, error)
	// PruneEvents forgets event ids seen before the time.
	PruneEvents(ctx context.Context, before time.Time) (int64, error)
}

// AuditStore appends to the audit and reads it back.
type AuditStore interface {
	// Audit appends an audit event.
	Audit(ctx context.Context, e AuditEvent) error
	// AuditRejectedClick appends a rejected_click event coalesced: at most
	// one per (actor, batch, reason) a minute, the others counted (and
	// the count carried by the key's next event); false when it was only
	// counted.
	AuditRejectedClick(ctx context.Context, e AuditEvent, reason string) (bool, error)
	AuditEvents(ctx context.Context, f AuditFilter) ([]AuditEvent, error)
}

// RunInfo tells a tool which conversation and decision a run belongs to
// (built-in platform tools need the channel and the approver).
type RunInfo struct {
	Platform    string
	Channel     string
	Thread      string
	BatchID     string
	Key         string
	RequestedBy string
	DecidedBy   string // platform user id, or "policy"
}

type runInfoKey struct{}

// WithRunInfo returns a context carrying info.
func WithRunInfo(ctx context.Context, info RunInfo) context.Context {
	return context.WithValue(ctx, runInfoKey{}, info)
}

// RunInfoFrom returns the RunInfo of a run's context.
func RunInfoFrom(ctx context.Context) (RunInfo, bool) {
	info, ok := ctx.Value(runInfoKey{}).(RunInfo)
	return info, ok
}
