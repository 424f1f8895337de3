package gateway

import (
	"context"
	"encoding/json"
	"errors"
)

// Airlock as an MCP server (issue 37): what the MCP side (package
// mcpserver) needs of the approval core. A client's calls over MCP are
// requests of the one path, in a conversation per client and MCP session;
// unlike the approval API's, Airlock runs them.

// Tool is one of Airlock's tools as a client is offered it over MCP.
type Tool struct {
	Name        string
	Description string
	InputSchema json.RawMessage // a JSON Schema object
}

// States of a call over MCP.
const (
	CallWaiting = "waiting" // a person has not decided, or it is about to run
	CallDone    = "done"    // it ran: Result is its (scrubbed) result
	CallRefused = "refused" // it did not run: Result says why, as Airlock's agent is told
)

// Outcome is where a call over MCP stands.
type Outcome struct {
	ID      string // the request's id (its batch)
	State   string
	Result  string
	IsError bool
	CardURL string // the card's link, once posted
}

// Tools is the approval core as the MCP server sees it. Every call is for
// one client; a tool the client is not offered is ErrUnknownTool.
type Tools interface {
	// Offered lists the tools the client's `tools` globs give it.
	Offered(c Client) []Tool
	// Call makes the call, or joins the session's call of the same tool
	// and arguments a person was asked about (a retry): it returns where
	// it stands at once; an ungated call has run.
	Call(ctx context.Context, c Client, session, tool string, args json.RawMessage) (Outcome, error)
	// Outcome is where the client's call id stands now.
	Outcome(ctx context.Context, c Client, id string) (Outcome, error)
	// Left records that the client stopped waiting for its call id
	// (cancelled, or went away) while a person had not decided: the card
	// waits on, and says so.
	Left(ctx context.Context, c Client, id string) error
}

// Errors of Tools.Call.
var (
	// ErrUnknownTool is a tool the client is not offered.
	ErrUnknownTool = errors.New("unknown tool")
	// ErrTooManyPending: a new call would put more of the client's calls
	// in wait than its max_pending (a retry joining one is never refused).
	ErrTooManyPending = errors.New("too many calls wait for approval")
)
