package bot

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"

	"github.com/airlockhq/airlock/confirm"
)

// Card is the platform-neutral approval card of a paused reply. Each
// platform renders it its own way.
type Card struct {
	BatchID     string
	Intro       string // the model's own words in the paused reply, if any
	RequestedBy string // platform user id
	Approvers   ApproverSet
	CreatedAt   time.Time
	ExpiresAt   time.Time
	Status      confirm.BatchStatus
	Calls       []CardCall
}

// CardCall is one call on a card.
type CardCall struct {
	Ref         string // opaque reference for buttons; see confirm.ParseRef
	Number      int    // 1-based, for people
	Key         string
	Tool        string
	Summary     string // the read-back, built from the validated arguments only
	Args        string // pretty JSON of the exact arguments
	Flagged     bool   // needs a person's decision
	FlagReason  string // why a person is asked when not for the tool's own flag (empty otherwise); show it
	Decision    confirm.DecisionStatus
	DecidedBy   string
	DecidedAt   *time.Time
	DenyMessage string
	Run         confirm.RunStatus
	Result      string
}

// Open reports whether the call still waits for a decision.
func (c CardCall) Open() bool { return c.Decision == confirm.DecisionPending }

// Complete reports whether no call of the card waits any more.
func (c Card) Complete() bool {
	for _, cc := range c.Calls {
		if cc.Open() {
			return false
		}
	}
	return true
}

// Outcome is a short human description of where a call stands.
func (c CardCall) Outcome() string {
	at := ""
	if c.DecidedAt != nil {
		at = " at " + c.DecidedAt.UTC().Format("15:04:05 UTC")
	}
	switch c.Decision {
	case confirm.DecisionPending:
		return "waiting for a decision"
	case confirm.DecisionDenied:
		if c.DecidedBy == SystemActor {
			return "not run: " + c.DenyMessage
		}
		out := "denied by " + c.DecidedBy + at
		if reason := strings.TrimPrefix(c.DenyMessage, confirm.DefaultDenyMessage); strings.TrimSpace(reason) != "" {
			out += ". " + strings.TrimSpace(reason)
		}
		return out
	case confirm.DecisionExpired:
		return "expired: nobody decided in time; not run"
	case confirm.DecisionInvalid:
		return "not run: " + c.DenyMessage
	}
	who := "allowed by " + c.DecidedBy + at
	if c.Decision == confirm.DecisionAllowedByPolicy {
		who = "runs with the batch (no approval needed)"
	}
	switch c.Run {
	case confirm.RunRunning:
		return who + "; running"
	case confirm.RunSucceeded:
		return who + "; succeeded"
	case confirm.RunFailed:
		return who + "; failed: " + excerpt(c.Result, 200)
	case confirm.RunUnknown:
		return who + "; outcome unknown — check before retrying (it may have taken effect; Airlock will not retry it)"
	}
	return who
}

// SystemActor decides for nobody in particular: abandoned pauses, expiry.
const SystemActor = "airlock"

// PolicyActor records calls the policy let through at pause time.
const PolicyActor = "policy"

// cardFor builds the card of a batch.
func cardFor(b *confirm.Batch, intro string, approvers ApproverSet) Card {
	c := Card{
		BatchID:     b.ID,
		Intro:       intro,
		RequestedBy: b.RequestedBy,
		Approvers:   approvers,
		CreatedAt:   b.CreatedAt,
		ExpiresAt:   b.ExpiresAt,
		Status:      b.Status,
	}
	for _, call := range b.Calls {
		c.Calls = append(c.Calls, CardCall{
			Ref:         confirm.Ref(b.ID, call.Position),
			Number:      call.Position + 1,
			Key:         call.Key,
			Tool:        call.Tool,
			Summary:     call.Summary,
			Args:        prettyJSON(call.Args),
			Flagged:     call.Flagged,
			FlagReason:  flagReason(call),
			Decision:    call.Decision,
			DecidedBy:   call.DecidedBy,
			DecidedAt:   call.DecidedAt,
			DenyMessage: call.DenyMessage,
			Run:         call.Run,
			Result:      call.Result,
		})
	}
	return c
}

func prettyJSON(raw json.RawMessage) string {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return string(raw)
	}
	return buf.String()
}

func excerpt(s string, n int) string {
	s = strings.TrimSpace(s)
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// flagReason is why a person is asked when it is not the tool's own flag.
func flagReason(c confirm.Call) string {
	for _, r := range c.Reasons {
		if r.Kind == confirm.ReasonUnknownOutcome {
			return RepeatUnknownReason
		}
	}
	return ""
}
