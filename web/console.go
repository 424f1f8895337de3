package web

import (
	"context"
	"time"

	"github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
)

// Console is what the pages need of the approval core (the bot implements
// it: bot/console.go). A person is who the provider vouched for, with
// their chat identities; the core says what they may see and do.
type Console interface {
	// Inbox lists the waiting requests the person may decide, and their
	// own recent requests, newest first.
	Inbox(ctx context.Context, p Who) ([]Entry, error)
	// Approval is one request as its card shows it, to a person who may
	// decide it or asked for it; confirm.ErrNotFound for anyone else (and
	// for no such request), so a page never says which exist.
	Approval(ctx context.Context, batchID string, p Who) (Approval, error)
	// DecideOnPage is an Allow or a Deny (with a reason) of one call, made on
	// its page by the person, with the single-use decision of a click;
	// its errors are the click's (bot.UserMessage says them).
	DecideOnPage(ctx context.Context, p Who, d Decision) error
	// EditPage is the Edit… form of the waiting call of ref (the card's
	// call reference, with its revision), for a person who may allow it,
	// signed in with assurance a; the errors are a click's.
	EditPage(ctx context.Context, p Who, ref string, a confirm.Assurance) (EditPage, error)
	// EditOnPage applies the person's edited arguments (JSON text) to the
	// call, as an Edit… in chat does: it counts as their Allow when made
	// with the assurance the call's tier needs, else it is stored and the
	// call waits. Its errors are a click's (bot.UserMessage says them).
	EditOnPage(ctx context.Context, p Who, e Edit) error
	// RunPage is a runbook run as its message shows it, with its steps'
	// requests, to the person who started it or an approver of its
	// channel; confirm.ErrNotFound for anyone else.
	RunPage(ctx context.Context, runID string, p Who) (Run, error)
}

// EditPage is a call's Edit… form on the page.
type EditPage struct {
	Ref  string // the call's reference, with the revision the form shows
	Form card.Form
}

// Edit is a person's edited arguments of the call of Ref.
type Edit struct {
	Ref       string
	Args      string // JSON text, as typed
	Assurance confirm.Assurance
}

// Run is a runbook run's page: its message, and each step's request
// (its approval page), by step id.
type Run struct {
	Run      card.Run
	Requests map[string]string // step id -> batch id of its latest attempt
}

// Who is a signed-in person: their email and their user id on each chat
// platform ("slack", "discord").
type Who struct {
	Email string
	IDs   map[string]string
}

// Entry is one request in the inbox.
type Entry struct {
	BatchID   string
	Platform  string
	Channel   string
	Tools     []string // of the calls that wait (untrusted)
	Waiting   int      // calls waiting for a person
	Requester string   // a platform user id
	CreatedAt time.Time
	ExpiresAt time.Time
	MayDecide bool // the person may decide a call of it
	Mine      bool // the person asked for it
}

// Approval is one request's page: its card, and what the person may do.
type Approval struct {
	Card      card.Card
	Platform  string
	MayDecide bool // some call waits and the person may decide it
	// StepUp names, by call reference, what an allow of the call needs
	// when it is more than a chat click (confirmation.step_up).
	StepUp map[string]confirm.Assurance
	// History is the request's audit rows, oldest first, as lines.
	History []card.Line
}

// Decision is a person's Allow or Deny of the call of Ref (the card's
// call reference, with its revision), with an optional reason, and for
// a critical call the phrase typed.
type Decision struct {
	Ref    string
	Allow  bool
	Reason string
	Phrase string // a critical call's confirmation phrase, typed
	// Assurance is how the person proved who they are: sso when they
	// signed in within FreshSignIn, else chat (a session, no more).
	Assurance confirm.Assurance
	// Credential is the passkey's id (base64url) of a passkey vote.
	Credential string
}
