package hook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/airlockhq/airlock/internal/jsonobj"
)

// Decision is what the hook tells the agent.
type Decision struct {
	Allow bool
	// Reason is shown to the agent (and through it to the model): why it
	// was denied, or who allowed it.
	Reason string
	// Args, when the approver edited the call, are the arguments that may
	// run; nil when they are the agent's own.
	Args json.RawMessage
}

// poll is the longest a single request waits on the server (the API
// holds one for at most 60 s).
const poll = 25 * time.Second

// decide asks Airlock about one call and waits for a person until the
// deadline. It fails closed: anything but an approval allowed and
// consumed by this call is a deny, with the reason.
func decide(ctx context.Context, c *Client, r Request, deadline time.Time, now func() time.Time) Decision {
	wait := func() time.Duration { return min(poll, max(deadline.Sub(now()), 0)) }
	ctx, cancel := context.WithDeadline(ctx, deadline.Add(5*time.Second))
	defer cancel()
	a, err := c.Create(ctx, r, wait())
	for err == nil && a.Status == StatusPending && now().Before(deadline) {
		a, err = c.Get(ctx, a.ID, wait())
	}
	switch {
	case err != nil:
		return Decision{Reason: failed(err)}
	case a.Status == StatusPending:
		return Decision{Reason: waiting(a)}
	case a.Status == StatusDenied:
		return Decision{Reason: fmt.Sprintf("Denied in Airlock (request %s): %s. Nothing ran.", a.ID, orSaid(a.Reason, "no reason given"))}
	case a.Status == StatusExpired:
		return Decision{Reason: fmt.Sprintf("Nobody decided in time; the request expired in Airlock (request %s). Nothing ran.", a.ID)}
	case a.Status != StatusAllowed:
		return Decision{Reason: fmt.Sprintf("Airlock answered an unknown status %q (request %s). Nothing ran.", oneLine(a.Status, 40), a.ID)}
	}
	// Allowed: carried out only once the consume succeeded (a second
	// retry of the same call finds it consumed, and is denied).
	if _, err := c.Consume(ctx, a.ID); err != nil {
		if errors.Is(err, ErrConflict) {
			return Decision{Reason: fmt.Sprintf("This approval was already used (request %s); call again for a new one. Nothing ran.", a.ID)}
		}
		return Decision{Reason: failed(err)}
	}
	d := Decision{Allow: true, Reason: fmt.Sprintf("Allowed in Airlock (request %s): %s", a.ID, orSaid(a.Reason, "allowed"))}
	if len(a.Args) > 0 && !jsonobj.Same(a.Args, r.Args) {
		d.Args = a.Args
	}
	return d
}

// waiting is the deny at the deadline: the card still waits, and the
// agent's identical retry will find the approval once it is given.
func waiting(a Approval) string {
	where := orSaid(a.CardURL, "Airlock")
	return fmt.Sprintf("Waiting for approval in %s (request %s). Nothing ran. Call the same tool with the same arguments again once it is approved.", where, a.ID)
}

// failed is the deny when Airlock could not give a decision.
func failed(err error) string {
	return fmt.Sprintf("Airlock could not decide (%s), so this call is denied. Nothing ran.", oneLine(err.Error(), 300))
}

func orSaid(s, otherwise string) string {
	if s = oneLine(s, 500); s != "" {
		return s
	}
	return otherwise
}
