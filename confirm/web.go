package confirm

import (
	"context"
	"time"
)

// The web console's sign-ins (package web). A login in progress is kept
// from the redirect to the provider until its callback, once: its state
// (stored hashed), nonce and PKCE verifier. A session is a signed-in
// person's, found by its cookie's hash; both expire.

// WebLogin is a sign-in in progress.
type WebLogin struct {
	Nonce    string
	Verifier string
	ReturnTo string // the console's path to go back to
}

// WebSession is a signed-in person's session.
type WebSession struct {
	Email     string
	CSRF      string    // the token its forms carry
	AuthTime  time.Time // when the provider last authenticated the person
	CreatedAt time.Time
	ExpiresAt time.Time
}

// WebStore keeps the console's logins and sessions. Each login is taken
// once; expired ones are never returned.
type WebStore interface {
	StartLogin(ctx context.Context, stateHash string, l WebLogin, ttl time.Duration) error
	// TakeLogin returns and deletes the login of stateHash, by one
	// conditional DELETE; ErrNotFound when there is none, it was taken,
	// or it expired.
	TakeLogin(ctx context.Context, stateHash string) (WebLogin, error)
	CreateWebSession(ctx context.Context, idHash string, s WebSession, ttl time.Duration) (WebSession, error)
	// WebSession is the session of idHash; ErrNotFound when there is none
	// or it expired.
	WebSession(ctx context.Context, idHash string) (WebSession, error)
	EndWebSession(ctx context.Context, idHash string) error
	// ConsoleBatches lists the ids of the batches the console's inbox may
	// show, newest first, at most limit of each kind: the pending ones, and
	// those of the last week that one of requesters asked for.
	ConsoleBatches(ctx context.Context, requesters []string, limit int) (pending, asked []string, err error)
}

// PasskeyStore keeps the console's passkeys and its WebAuthn ceremonies.
// A ceremony (a registration, or a vote's assertion) is taken once, by
// the person who began it, before it expires.
type PasskeyStore interface {
	AddPasskey(ctx context.Context, email, id, credential string) error
	// Passkeys are the person's credentials (as AddPasskey stored them).
	Passkeys(ctx context.Context, email string) ([]string, error)
	UpdatePasskey(ctx context.Context, id, credential string) error
	StartCeremony(ctx context.Context, idHash, email, kind, data string, ttl time.Duration) error
	// TakeCeremony returns and deletes the ceremony, by one conditional
	// DELETE; ErrNotFound when none of that person and kind is live.
	TakeCeremony(ctx context.Context, idHash, email, kind string) (string, error)
}
