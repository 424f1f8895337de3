package gateway

import "strings"

// A client's session is a conversation of the client's channel keyed by
// the thread gateway/<client>/<session>: no Slack or Discord thread id has
// that form, and a client's name holds no "/". The core stores it so; the
// audit and the webhook payload name the client and session from it.
const sessionPrefix = "gateway/"

// SessionThread is the conversation thread of a client's session.
func SessionThread(client, session string) string { return sessionPrefix + client + "/" + session }

// SessionOf reads a conversation thread: the client and session it is,
// or ok false for a thread of a chat platform.
func SessionOf(thread string) (client, session string, ok bool) {
	rest, found := strings.CutPrefix(thread, sessionPrefix)
	if !found {
		return "", "", false
	}
	client, session, ok = strings.Cut(rest, "/")
	return client, session, ok && client != ""
}

// CallbackTarget is the events outbox's target of a client's callbacks
// (a webhook's target is its URL's hash, never of this form).
func CallbackTarget(client string) string { return "callback/" + client }
