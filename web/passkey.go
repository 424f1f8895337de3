package web

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/go-webauthn/webauthn/protocol"
	"github.com/go-webauthn/webauthn/webauthn"

	"github.com/airlockhq/airlock/confirm"
)

// Passkeys (step-up `passkey`). A person registers passkeys on
// /ui/passkeys, only within FreshSignIn of a sign-in. A vote with a
// passkey is an assertion, with user verification, whose challenge is
// the hash of the call's reference (its batch, position and revision),
// its arguments and a single-use random nonce: it cannot allow another
// call, nor these arguments once edited. Each ceremony (registration,
// vote) is kept in storage, taken once, for ceremonyTTL.

const ceremonyTTL = 5 * time.Minute

// Ceremony kinds.
const (
	ceremonyRegister = "register"
	ceremonyVote     = "vote"
)

// Store is what the console keeps: sign-ins, sessions, passkeys and
// their ceremonies.
type Store interface {
	confirm.WebStore
	confirm.PasskeyStore
}

// person is a signed-in person as WebAuthn sees them: an opaque handle
// (a hash of the email) and their passkeys.
type person struct {
	email string
	creds []webauthn.Credential
}

func (p person) WebAuthnID() []byte {
	sum := sha256.Sum256([]byte("airlock-user:" + p.email))
	return sum[:]
}
func (p person) WebAuthnName() string                       { return p.email }
func (p person) WebAuthnDisplayName() string                { return p.email }
func (p person) WebAuthnCredentials() []webauthn.Credential { return p.creds }

// newWebAuthn is the relying party of base: its host is the RP id, its
// origin the only one accepted.
func newWebAuthn(base *url.URL) (*webauthn.WebAuthn, error) {
	return webauthn.New(&webauthn.Config{RPDisplayName: "Airlock", RPID: base.Hostname(), RPOrigins: []string{base.Scheme + "://" + base.Host}})
}

// personOf loads a person's passkeys.
func (s *Server) personOf(ctx context.Context, email string) (person, error) {
	raw, err := s.store.Passkeys(ctx, email)
	if err != nil {
		return person{}, err
	}
	p := person{email: email}
	for _, r := range raw {
		var c webauthn.Credential
		if err := json.Unmarshal([]byte(r), &c); err != nil {
			s.log.Error("web: a stored passkey does not read; left out", "email", email, "err", err)
			continue
		}
		p.creds = append(p.creds, c)
	}
	return p, nil
}

// passkeys is the page that lists and registers the person's passkeys.
func (s *Server) passkeys(w http.ResponseWriter, r *http.Request, se session) {
	if s.wa == nil {
		s.page(w, http.StatusNotFound, "message", pageData{Title: s.w.NoPasskeysTitle, Who: se.who, CSRF: se.csrf, Message: s.w.NoPasskeys})
		return
	}
	p, err := s.personOf(r.Context(), se.who.Email)
	if err != nil {
		s.fail(w, r, "passkeys", err)
		return
	}
	s.page(w, http.StatusOK, "passkeys", pageData{Title: s.w.Passkeys, Who: se.who, CSRF: se.csrf, Fresh: s.assurance(se) == confirm.AssuranceSSO,
		Here: r.URL.Path, Passkeys: len(p.creds)})
}

// jsonCSRF checks a script's request: the session's token in its header
// (the cross-origin check has run before).
func jsonCSRF(r *http.Request, se session) bool {
	return se.csrf != "" && subtle.ConstantTimeCompare([]byte(r.Header.Get("X-CSRF-Token")), []byte(se.csrf)) == 1
}

// script runs h, a passkey request of the console's script: only where
// passkeys can be, and only with the session's token.
func (s *Server) script(h func(http.ResponseWriter, *http.Request, session)) func(http.ResponseWriter, *http.Request, session) {
	return func(w http.ResponseWriter, r *http.Request, se session) {
		switch {
		case s.wa == nil:
			jsonError(w, http.StatusNotFound, s.w.NoPasskeys)
		case !jsonCSRF(r, se):
			jsonError(w, http.StatusForbidden, s.w.ForeignForm)
		default:
			h(w, r, se)
		}
	}
}

// ceremonyReply is what a ceremony's start answers the page's script.
type ceremonyReply struct {
	Ceremony string `json:"ceremony"`
	Options  any    `json:"options"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// jsonError answers a script with a safe message.
func jsonError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

// registerBegin starts a registration: within FreshSignIn only.
func (s *Server) registerBegin(w http.ResponseWriter, r *http.Request, se session) {
	if s.assurance(se) != confirm.AssuranceSSO {
		jsonError(w, http.StatusForbidden, s.w.AddPasskeyNeedsFresh+s.w.AddPasskeyFreshLink+s.w.AddPasskeyFreshAfter)
		return
	}
	p, err := s.personOf(r.Context(), se.who.Email)
	if err != nil {
		s.jsonFail(w, "passkeys", err)
		return
	}
	var exclude []protocol.CredentialDescriptor
	for _, c := range p.creds {
		exclude = append(exclude, c.Descriptor())
	}
	opts, data, err := s.wa.BeginRegistration(p, webauthn.WithExclusions(exclude),
		webauthn.WithAuthenticatorSelection(protocol.AuthenticatorSelection{UserVerification: protocol.VerificationRequired,
			ResidentKey: protocol.ResidentKeyRequirementPreferred}))
	if err != nil {
		s.jsonFail(w, "begin registration", err)
		return
	}
	s.startCeremony(w, r, se, ceremonyRegister, data, nil, opts)
}

// vote is what a vote's ceremony holds beside WebAuthn's session: the
// call it allows, its arguments' hash when it began, the phrase typed.
type vote struct {
	Ref      string `json:"ref"`
	ArgsHash string `json:"args_hash"`
	Phrase   string `json:"phrase"`
}

type ceremony struct {
	Session webauthn.SessionData `json:"session"`
	Vote    *vote                `json:"vote,omitempty"`
}

func (s *Server) startCeremony(w http.ResponseWriter, r *http.Request, se session, kind string, data *webauthn.SessionData, v *vote, opts any) {
	b, err := json.Marshal(ceremony{Session: *data, Vote: v})
	if err != nil {
		s.jsonFail(w, "ceremony", err)
		return
	}
	id := token()
	if err := s.store.StartCeremony(r.Context(), hash(id), se.who.Email, kind, string(b), ceremonyTTL); err != nil {
		s.jsonFail(w, "start ceremony", err)
		return
	}
	writeJSON(w, http.StatusOK, ceremonyReply{Ceremony: id, Options: opts})
}

// takeCeremony takes the ceremony the request names, once.
func (s *Server) takeCeremony(r *http.Request, se session, kind string) (ceremony, error) {
	raw, err := s.store.TakeCeremony(r.Context(), hash(r.URL.Query().Get("ceremony")), se.who.Email, kind)
	if err != nil {
		return ceremony{}, err
	}
	var c ceremony
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		return ceremony{}, fmt.Errorf("ceremony: %w", err)
	}
	return c, nil
}

// registerFinish verifies the new credential and keeps it.
func (s *Server) registerFinish(w http.ResponseWriter, r *http.Request, se session) {
	c, err := s.takeCeremony(r, se, ceremonyRegister)
	if err != nil {
		jsonError(w, http.StatusConflict, s.w.PasskeyExpired)
		return
	}
	p, err := s.personOf(r.Context(), se.who.Email)
	if err != nil {
		s.jsonFail(w, "passkeys", err)
		return
	}
	cred, err := s.wa.FinishRegistration(p, c.Session, r)
	if err != nil {
		s.log.Info("web: passkey registration refused", "email", se.who.Email, "err", err)
		jsonError(w, http.StatusBadRequest, s.w.PasskeyNotVerified)
		return
	}
	b, _ := json.Marshal(cred)
	if err := s.store.AddPasskey(r.Context(), se.who.Email, base64.RawURLEncoding.EncodeToString(cred.ID), string(b)); err != nil {
		s.jsonFail(w, "add passkey", err)
		return
	}
	s.log.Info("web: passkey added", "email", se.who.Email)
	writeJSON(w, http.StatusOK, map[string]string{"ok": "added"})
}

// argsHash is what a vote binds of a call's arguments.
func argsHash(args string) string {
	sum := sha256.Sum256([]byte(args))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// voteBegin starts a passkey vote on a call of a request the person may
// see: the challenge binds the call's reference (with its revision), its
// arguments and a nonce.
func (s *Server) voteBegin(w http.ResponseWriter, r *http.Request, se session) {
	var in struct {
		Ref    string `json:"ref"`
		Phrase string `json:"phrase"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 16<<10)).Decode(&in); err != nil {
		jsonError(w, http.StatusBadRequest, s.w.Malformed)
		return
	}
	a, err := s.console.Approval(r.Context(), r.PathValue("id"), se.who)
	if errors.Is(err, confirm.ErrNotFound) {
		jsonError(w, http.StatusNotFound, s.w.NotFound)
		return
	} else if err != nil {
		s.jsonFail(w, "approval", err)
		return
	}
	call := a.Card.Call(in.Ref)
	if call == nil || !call.Open() {
		jsonError(w, http.StatusConflict, s.w.CallChanged)
		return
	}
	p, err := s.personOf(r.Context(), se.who.Email)
	if err != nil {
		s.jsonFail(w, "passkeys", err)
		return
	}
	if len(p.creds) == 0 {
		jsonError(w, http.StatusConflict, s.w.NoPasskeyYet)
		return
	}
	v := &vote{Ref: in.Ref, ArgsHash: argsHash(call.Args), Phrase: in.Phrase}
	nonce := token()
	challenge := sha256.Sum256([]byte("airlock-vote\x00" + v.Ref + "\x00" + v.ArgsHash + "\x00" + nonce))
	opts, data, err := s.wa.BeginLogin(p, webauthn.WithChallenge(challenge[:]), webauthn.WithUserVerification(protocol.VerificationRequired))
	if err != nil {
		s.jsonFail(w, "begin vote", err)
		return
	}
	s.startCeremony(w, r, se, ceremonyVote, data, v, opts)
}

// voteFinish verifies the assertion (the challenge, the origin, the
// signature of one of the person's passkeys, user verification), checks
// the call still has the arguments the challenge bound, and casts the
// vote with assurance passkey at the bound revision.
func (s *Server) voteFinish(w http.ResponseWriter, r *http.Request, se session) {
	c, err := s.takeCeremony(r, se, ceremonyVote)
	if err != nil || c.Vote == nil {
		jsonError(w, http.StatusConflict, s.w.VoteExpired)
		return
	}
	p, err := s.personOf(r.Context(), se.who.Email)
	if err != nil {
		s.jsonFail(w, "passkeys", err)
		return
	}
	cred, err := s.wa.FinishLogin(p, c.Session, r)
	if err != nil {
		s.log.Info("web: passkey vote refused", "email", se.who.Email, "err", err)
		jsonError(w, http.StatusBadRequest, s.w.VoteNotVerified)
		return
	}
	if b, err := json.Marshal(cred); err == nil {
		if err := s.store.UpdatePasskey(r.Context(), base64.RawURLEncoding.EncodeToString(cred.ID), string(b)); err != nil {
			s.log.Error("web: update passkey", "err", err)
		}
	}
	a, err := s.console.Approval(r.Context(), r.PathValue("id"), se.who)
	if err != nil {
		jsonError(w, http.StatusNotFound, s.w.NotFound)
		return
	}
	call := a.Card.Call(c.Vote.Ref)
	if call == nil || argsHash(call.Args) != c.Vote.ArgsHash {
		s.log.Info("web: passkey vote for arguments that changed since", "email", se.who.Email, "ref", c.Vote.Ref)
		jsonError(w, http.StatusConflict, s.w.ArgumentsChanged)
		return
	}
	err = s.console.DecideOnPage(r.Context(), se.who, Decision{Ref: c.Vote.Ref, Allow: true, Phrase: c.Vote.Phrase,
		Assurance: confirm.AssurancePasskey, Credential: base64.RawURLEncoding.EncodeToString(cred.ID)})
	if err != nil {
		s.log.Info("web: passkey vote changed nothing", "email", se.who.Email, "err", err)
		jsonError(w, http.StatusConflict, s.say(err))
		return
	}
	s.log.Info("web: allowed with a passkey", "email", se.who.Email, "ref", c.Vote.Ref)
	writeJSON(w, http.StatusOK, map[string]string{"ok": "allowed"})
}

func (s *Server) jsonFail(w http.ResponseWriter, what string, err error) {
	s.log.Error("web: "+what, "err", err)
	jsonError(w, http.StatusInternalServerError, "Something went wrong; nothing changed. The operators have the details in the logs.")
}
