package card

import (
	"strconv"
	"strings"
	"time"

	"github.com/airlockhq/airlock/confirm"
)

// A request's history, as its page on the web console shows it: one line
// per audit row of the request, oldest first, in shared words. Every
// person is a Person part and every tool a Code part: nothing from a
// model, a tool or a person becomes a sentence of its own.

// HistoryHeading heads the history.
const HistoryHeading = "History"

// HistoryEvent is one audit row of a request.
type HistoryEvent struct {
	At    time.Time
	Kind  confirm.AuditKind
	Actor string // a platform user id, or one of Airlock's actors (ActorName)
	Call  int    // the 1-based number of the call it is about; 0: the request's
	Tool  string
	// Status is a decision's (allowed, denied, expired…) or a run's
	// (succeeded, failed, unknown…).
	Status    string
	Abandoned bool              // a decision made because the requester moved on
	Via       confirm.Assurance // how a decision or a vote was made
	Votes     int               // an approval's count so far,
	Required  int               // of the approvals needed
	Why       string            // why a rejected click changed nothing (Airlock's words)
}

// Line is the event as one line: its time, then what happened.
func (e HistoryEvent) Line() Line {
	ps := []Part{{Kind: Time, At: e.At}, words(" ")}
	who := actorPart(e.Actor)
	call := func() []Part {
		if e.Call == 0 {
			return []Part{words("the request")}
		}
		out := []Part{words("call " + strconv.Itoa(e.Call))}
		if e.Tool != "" {
			out = append(out, words(", "), Part{Kind: Code, Text: e.Tool})
		}
		return out
	}
	via := func() []Part {
		switch e.Via {
		case confirm.AssurancePasskey:
			return []Part{words(" with a passkey")}
		case confirm.AssuranceSSO:
			return []Part{words(" after a fresh sign-in")}
		}
		return nil
	}
	switch e.Kind {
	case confirm.AuditToolCall:
		ps = append(append(append(ps, who, words(" asked for ")), call()...), words(" (the agent's call)"))
	case confirm.AuditApprovalRequest:
		ps = append(ps, words("the card asked for a decision"))
	case confirm.AuditApproval:
		ps = append(append(append(ps, who, words(" approved ")), call()...), via()...)
		if e.Required > 1 {
			ps = append(ps, words(" ("+strconv.Itoa(e.Votes)+" of "+strconv.Itoa(e.Required)+" approvals)"))
		}
	case confirm.AuditDecision:
		switch {
		case e.Abandoned:
			ps = append(append(ps, call()...), words(" not run: the requester moved on"))
		case e.Status == string(confirm.DecisionExpired):
			ps = append(append(ps, call()...), words(" expired: nobody decided in time"))
		case e.Status == string(confirm.DecisionAllowed) || e.Status == string(confirm.DecisionDenied):
			ps = append(append(append(ps, who, words(" "+e.Status+" ")), call()...), via()...)
		default:
			ps = append(append(ps, call()...), words(": "), Part{Kind: Code, Text: e.Status}, words(" by "), who)
		}
	case confirm.AuditEdited:
		ps = append(append(append(ps, who, words(" edited the arguments of ")), call()...), via()...)
	case confirm.AuditRejectedClick:
		ps = append(append(append(ps, who, words("'s click on ")), call()...), words(" changed nothing"))
		if e.Why != "" {
			ps = append(ps, words(": "+e.Why))
		}
	case confirm.AuditToolResult:
		ps = append(append(ps, call()...), words(" ran: "), Part{Kind: Code, Text: e.Status})
	case confirm.AuditExtended:
		ps = append(ps, who, words(" extended the deadline"))
	case confirm.AuditEscalated:
		ps = append(ps, words("the request was escalated"))
	case confirm.AuditGrantCreated:
		ps = append(ps, who, words(" allowed "), Part{Kind: Code, Text: e.Tool}, words(" for a while (a grant)"))
	case confirm.AuditGrantUsed:
		ps = append(append(ps, words("a grant allowed ")), call()...)
	case confirm.AuditQuestionAsked:
		ps = append(append(ps, words("the tool of ")), call()...)
		ps = append(ps, words(" asked a question"))
	case confirm.AuditQuestionAnswered:
		ps = append(ps, who, words(" ended the tool's question"))
	default:
		ps = append(ps, Part{Kind: Code, Text: strings.TrimSpace(string(e.Kind))}, words(" by "), who)
	}
	return Line{Parts: ps}
}

// actorPart names an actor: Airlock's own by name, a rule or a grant by
// its name as code, a person as a Person.
func actorPart(id string) Part {
	if name, ok := ActorName(id); ok {
		return words(name)
	}
	for _, p := range []string{"rule:", "grant:"} {
		if rest, ok := strings.CutPrefix(id, p); ok {
			return Part{Kind: Code, Text: strings.TrimSuffix(p, ":") + " " + rest}
		}
	}
	return Part{Kind: Person, Text: id}
}
