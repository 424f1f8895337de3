package gateway

import "strings"

// A client's session is a conversation of the client's channel keyed by
// the thread gateway/<client>/<session> (the approval API: the client
// runs its calls) or mcp/<client>/<session> (an MCP session: Airlock runs
// them). No Slack or Discord thread id has either form, and a client's
// name holds no "/". The core stores it so; the audit and the webhook
// payload name the client and session from it.
const (
	sessionPrefix = "gateway/"
	mcpPrefix     = "mcp/"
)

// SessionThread is the conversation thread of a client's session of the
// approval API.
func SessionThread(client, session string) string { return sessionPrefix + client + "/" + session }

// MCPThread is the conversation thread of a client's MCP session.
func MCPThread(client, session string) string { return mcpPrefix + client + "/" + session }

// SessionOf reads a conversation thread: the client and session it is
// (of the approval API or MCP), or ok false for a thread of a chat
// platform.
func SessionOf(thread string) (client, session string, ok bool) {
	rest, found := strings.CutPrefix(thread, sessionPrefix)
	if !found {
		if rest, found = strings.CutPrefix(thread, mcpPrefix); !found {
			return "", "", false
		}
	}
	client, session, ok = strings.Cut(rest, "/")
	return client, session, ok && client != ""
}

// IsAPISession reports whether thread is a session of the approval API
// (whose calls the client carries out); IsMCPSession, of MCP (whose calls
// Airlock runs).
func IsAPISession(thread string) bool {
	_, _, ok := SessionOf(thread)
	return ok && strings.HasPrefix(thread, sessionPrefix)
}

func IsMCPSession(thread string) bool {
	_, _, ok := SessionOf(thread)
	return ok && strings.HasPrefix(thread, mcpPrefix)
}

// CallbackTarget is the events outbox's target of a client's callbacks
// (a webhook's target is its URL's hash, never of this form).
func CallbackTarget(client string) string { return "callback/" + client }

// ClientThreads are the thread prefixes of every session of a client, of
// the approval API and of MCP (the audit's filter by client).
func ClientThreads(client string) []string {
	return []string{SessionThread(client, ""), MCPThread(client, "")}
}
