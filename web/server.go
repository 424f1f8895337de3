package web

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/go-webauthn/webauthn/webauthn"
	"golang.org/x/oauth2"

	"github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
)

// Cookies and lifetimes.
const (
	sessionCookie = "airlock_session"
	loginCookie   = "airlock_login"
	// SessionTTL is how long a sign-in lasts.
	SessionTTL = 12 * time.Hour
	// loginTTL is how long a sign-in may take at the provider.
	loginTTL = 10 * time.Minute
	// FreshSignIn is how recent a sign-in must be for a step-up of sso.
	FreshSignIn = 5 * time.Minute
)

//go:embed assets/*
var assets embed.FS

//go:embed templates/*.html
var templateFS embed.FS

// csp is every page's Content-Security-Policy: nothing but the console's
// own stylesheet and script (passkeys), no inline script, no frame, forms
// and requests only to itself.
const csp = "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// Options wire a Server.
type Options struct {
	Config  Config
	Console Console
	Store   Store
	Log     *slog.Logger
	// HTTPClient reaches the provider (discovery, keys, token); nil: the
	// default client.
	HTTPClient *http.Client
	// Say is the safe message of a decision that changed nothing (the
	// core's: bot.UserMessage).
	Say func(error) string
	// Now is the clock sign-ins are judged fresh by; nil: time.Now.
	Now func() time.Time
	// Audit is what the audit page reads; nil: no audit page.
	Audit Audit
}

// Server serves the console under /ui/.
type Server struct {
	cfg     Config
	console Console
	store   Store
	wa      *webauthn.WebAuthn
	log     *slog.Logger
	client  *http.Client
	base    *url.URL
	secure  bool
	pages   *template.Template
	cop     *http.CrossOriginProtection
	say     func(error) string
	w       card.ConsoleWords
	now     func() time.Time
	audit   Audit

	mu       sync.Mutex
	provider *oidc.Provider // discovered at the first sign-in
}

// New checks the options and returns a Server. The provider is reached
// at the first sign-in, not here: a provider down at start delays
// nothing else.
func New(o Options) (*Server, error) {
	if o.Console == nil || o.Store == nil || o.Say == nil {
		return nil, errors.New("web: a console, a store and its messages are required")
	}
	if err := o.Config.Validate("web"); err != nil {
		return nil, err
	}
	if !o.Config.On() {
		return nil, errors.New("web: not configured (web.base_url)")
	}
	base, _ := url.Parse(strings.TrimSuffix(o.Config.BaseURL, "/"))
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: 15 * time.Second}
	}
	pages, err := template.New("pages").Funcs(funcs).ParseFS(templateFS, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("web: templates: %w", err)
	}
	cop := http.NewCrossOriginProtection()
	if o.Now == nil {
		o.Now = time.Now
	}
	// Passkeys need a domain name (a WebAuthn relying party is never an
	// IP address): on an IP the console has none (config refuses a
	// step-up of passkey there).
	var wa *webauthn.WebAuthn
	if net.ParseIP(base.Hostname()) == nil {
		if wa, err = newWebAuthn(base); err != nil {
			return nil, fmt.Errorf("web: passkeys: %w", err)
		}
	}
	return &Server{cfg: o.Config, console: o.Console, store: o.Store, log: o.Log, client: o.HTTPClient, base: base,
		secure: base.Scheme == "https", pages: pages, cop: cop, say: o.Say, w: card.Console(), now: o.Now, wa: wa, audit: o.Audit}, nil
}

// Handler serves the console: /ui/ and below.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /ui/static/", http.StripPrefix("/ui/static/", http.FileServerFS(mustSub(assets, "assets"))))
	mux.HandleFunc("GET /ui/login", s.login)
	mux.HandleFunc("GET /ui/callback", s.callback)
	mux.HandleFunc("POST /ui/logout", s.signedIn(s.logout))
	mux.HandleFunc("GET /ui/{$}", s.signedIn(s.inbox))
	mux.HandleFunc("GET /ui/approvals/{id}", s.signedIn(s.approval))
	mux.HandleFunc("POST /ui/approvals/{id}", s.signedIn(s.decide))
	mux.HandleFunc("GET /ui/approvals/{id}/edit", s.signedIn(s.editForm))
	mux.HandleFunc("POST /ui/approvals/{id}/edit", s.signedIn(s.edit))
	mux.HandleFunc("POST /ui/approvals/{id}/passkey/begin", s.signedIn(s.script(s.voteBegin)))
	mux.HandleFunc("POST /ui/approvals/{id}/passkey/finish", s.signedIn(s.script(s.voteFinish)))
	mux.HandleFunc("GET /ui/passkeys", s.signedIn(s.passkeys))
	mux.HandleFunc("GET /ui/runs/{id}", s.signedIn(s.runPage))
	mux.HandleFunc("GET /ui/audit", s.signedIn(s.auditPage))
	mux.HandleFunc("GET /ui/audit/export", s.signedIn(s.auditExport))
	mux.HandleFunc("POST /ui/passkeys/begin", s.signedIn(s.script(s.registerBegin)))
	mux.HandleFunc("POST /ui/passkeys/finish", s.signedIn(s.script(s.registerFinish)))
	mux.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) { s.notFound(w, r) })
	return s.headers(s.cop.Handler(mux))
}

// headers sets what every answer carries.
func (s *Server) headers(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("X-Frame-Options", "DENY")
		if !strings.HasPrefix(r.URL.Path, "/ui/static/") {
			h.Set("Cache-Control", "no-store")
		}
		next.ServeHTTP(w, r)
	})
}

// session is a signed-in request's person and session.
type session struct {
	who    Who
	csrf   string
	idHash string
	auth   time.Time // when the provider last authenticated the person
}

// signedIn runs h for a request with a live session of a known person;
// others go to the sign-in, which brings them back.
func (s *Server) signedIn(h func(http.ResponseWriter, *http.Request, session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, err := r.Cookie(sessionCookie)
		if err == nil && c.Value != "" {
			idHash := hash(c.Value)
			ws, err := s.store.WebSession(r.Context(), idHash)
			if err == nil {
				if p, ok := s.cfg.Person(ws.Email); ok {
					h(w, r, session{who: whoOf(p), csrf: ws.CSRF, idHash: idHash, auth: ws.AuthTime})
					return
				}
			} else if !errors.Is(err, confirm.ErrNotFound) {
				s.fail(w, r, "load session", err)
				return
			}
		}
		if r.Method != http.MethodGet {
			s.page(w, http.StatusForbidden, "message", pageData{Title: s.w.SignedOutTitle, Message: s.w.NoSession})
			return
		}
		http.Redirect(w, r, "/ui/login?return="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
	}
}

func whoOf(p Person) Who {
	ids := map[string]string{}
	if p.Slack != "" {
		ids["slack"] = p.Slack
	}
	if p.Discord != "" {
		ids["discord"] = p.Discord
	}
	return Who{Email: p.Email, IDs: ids}
}

// oauth is the provider's configuration, discovered once.
func (s *Server) oauth(ctx context.Context) (*oidc.Provider, *oauth2.Config, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.provider == nil {
		p, err := oidc.NewProvider(oidc.ClientContext(ctx, s.client), s.cfg.OIDC.Issuer)
		if err != nil {
			return nil, nil, fmt.Errorf("discover %s: %w", s.cfg.OIDC.Issuer, err)
		}
		s.provider = p
	}
	return s.provider, &oauth2.Config{
		ClientID: s.cfg.OIDC.ClientID, ClientSecret: s.cfg.OIDC.ClientSecret,
		Endpoint:    s.provider.Endpoint(),
		RedirectURL: s.base.String() + "/ui/callback",
		Scopes:      []string{oidc.ScopeOpenID, "email"},
	}, nil
}

// login sends the browser to the provider: a fresh state (kept hashed,
// and in a cookie binding the callback to this browser), nonce and PKCE
// verifier.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	_, oc, err := s.oauth(r.Context())
	if err != nil {
		s.log.Error("web: sign-in provider unreachable", "err", err)
		s.page(w, http.StatusServiceUnavailable, "message", pageData{Title: s.w.SignInUnavailableTitle, Message: s.w.SignInUnavailable})
		return
	}
	state, nonce, verifier := token(), token(), oauth2.GenerateVerifier()
	if err := s.store.StartLogin(r.Context(), hash(state), confirm.WebLogin{Nonce: nonce, Verifier: verifier, ReturnTo: returnTo(r.URL.Query().Get("return"))}, loginTTL); err != nil {
		s.fail(w, r, "start login", err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: state, Path: "/ui/callback", MaxAge: int(loginTTL.Seconds()),
		HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteLaxMode})
	opts := []oauth2.AuthCodeOption{oidc.Nonce(nonce), oauth2.S256ChallengeOption(verifier)}
	if r.URL.Query().Get("fresh") == "1" {
		// A step-up: the provider must authenticate the person again.
		opts = append(opts, oauth2.SetAuthURLParam("max_age", "0"), oauth2.SetAuthURLParam("prompt", "login"))
	}
	http.Redirect(w, r, oc.AuthCodeURL(state, opts...), http.StatusFound)
}

// returnTo is where a sign-in may bring the person back: a console path,
// never another site.
func returnTo(p string) string {
	if !strings.HasPrefix(p, "/ui/") || strings.HasPrefix(p, "//") || strings.ContainsAny(p, "\\\r\n") {
		return "/ui/"
	}
	return p
}

// callback ends a sign-in: the state must be this browser's and taken
// once, the code is exchanged with the verifier, the ID token verified
// (issuer, audience, expiry, signature, nonce), and its email must be
// verified and one of web.people.
func (s *Server) callback(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	state := q.Get("state")
	c, err := r.Cookie(loginCookie)
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Path: "/ui/callback", MaxAge: -1, HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteLaxMode})
	refuse := func(why string, args ...any) {
		s.log.Warn("web: sign-in refused", append([]any{"why", why}, args...)...)
		s.page(w, http.StatusForbidden, "message", pageData{Title: s.w.SignInFailedTitle, Message: s.w.SignInFailed, Link: "/ui/login"})
	}
	if err != nil || state == "" || subtle.ConstantTimeCompare([]byte(c.Value), []byte(state)) != 1 {
		refuse("state does not match this browser's")
		return
	}
	if e := q.Get("error"); e != "" {
		refuse("the provider answered an error", "error", clip(e, 100))
		return
	}
	l, err := s.store.TakeLogin(r.Context(), hash(state))
	if err != nil {
		refuse("unknown, expired or used state", "err", err)
		return
	}
	p, oc, err := s.oauth(r.Context())
	if err != nil {
		s.fail(w, r, "provider", err)
		return
	}
	ctx := oidc.ClientContext(r.Context(), s.client)
	tok, err := oc.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(l.Verifier))
	if err != nil {
		refuse("code exchange failed", "err", err)
		return
	}
	raw, _ := tok.Extra("id_token").(string)
	idt, err := p.Verifier(&oidc.Config{ClientID: s.cfg.OIDC.ClientID}).Verify(ctx, raw)
	if err != nil {
		refuse("ID token not valid", "err", err)
		return
	}
	var claims struct {
		Email    string `json:"email"`
		Verified *bool  `json:"email_verified"`
		AuthTime int64  `json:"auth_time"`
	}
	if err := idt.Claims(&claims); err != nil || subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(l.Nonce)) != 1 {
		refuse("nonce does not match")
		return
	}
	if claims.Email == "" || (claims.Verified != nil && !*claims.Verified) {
		refuse("no verified email in the ID token")
		return
	}
	person, ok := s.cfg.Person(claims.Email)
	if !ok {
		s.log.Warn("web: sign-in of an email not in web.people", "email", claims.Email)
		s.page(w, http.StatusForbidden, "message", pageData{Title: s.w.UnknownPersonTitle, Message: s.w.SignedInAs + claims.Email + s.w.UnknownPerson})
		return
	}
	auth := idt.IssuedAt
	if claims.AuthTime > 0 {
		auth = time.Unix(claims.AuthTime, 0).UTC()
	}
	sid := token()
	ws, err := s.store.CreateWebSession(r.Context(), hash(sid), confirm.WebSession{Email: person.Email, CSRF: token(), AuthTime: auth}, SessionTTL)
	if err != nil {
		s.fail(w, r, "create session", err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: sid, Path: "/ui/", Expires: ws.ExpiresAt, HttpOnly: true, Secure: s.secure,
		SameSite: http.SameSiteLaxMode})
	s.log.Info("web: signed in", "email", person.Email)
	http.Redirect(w, r, l.ReturnTo, http.StatusSeeOther)
}

// logout ends the session.
func (s *Server) logout(w http.ResponseWriter, r *http.Request, se session) {
	if !s.csrfOK(r, se) {
		s.page(w, http.StatusForbidden, "message", pageData{Title: s.w.RefusedTitle, Message: s.w.ForeignForm})
		return
	}
	if err := s.store.EndWebSession(r.Context(), se.idHash); err != nil {
		s.fail(w, r, "end session", err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Path: "/ui/", MaxAge: -1, HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteLaxMode})
	s.page(w, http.StatusOK, "message", pageData{Title: s.w.SignedOutTitle, Message: s.w.SignedOut, Link: "/ui/login"})
}

// csrfOK checks a state-changing form: its token is the session's (the
// cross-origin check has run before: a cross-site POST never gets here).
func (s *Server) csrfOK(r *http.Request, se session) bool {
	return subtle.ConstantTimeCompare([]byte(r.PostFormValue("csrf")), []byte(se.csrf)) == 1 && se.csrf != ""
}

func (s *Server) inbox(w http.ResponseWriter, r *http.Request, se session) {
	es, err := s.console.Inbox(r.Context(), se.who)
	if err != nil {
		s.fail(w, r, "inbox", err)
		return
	}
	d := pageData{Title: s.w.Inbox, Who: se.who, CSRF: se.csrf}
	for _, e := range es {
		if e.MayDecide {
			d.Waiting = append(d.Waiting, e)
		}
		if e.Mine {
			d.Mine = append(d.Mine, e)
		}
	}
	s.page(w, http.StatusOK, "inbox", d)
}

func (s *Server) approval(w http.ResponseWriter, r *http.Request, se session) {
	s.showApproval(w, r, se, http.StatusOK, "")
}

func (s *Server) showApproval(w http.ResponseWriter, r *http.Request, se session, status int, message string) {
	a, err := s.console.Approval(r.Context(), r.PathValue("id"), se.who)
	if errors.Is(err, confirm.ErrNotFound) {
		s.notFound(w, r)
		return
	} else if err != nil {
		s.fail(w, r, "approval", err)
		return
	}
	keys, err := s.store.Passkeys(r.Context(), se.who.Email)
	if err != nil {
		s.fail(w, r, "passkeys", err)
		return
	}
	s.page(w, status, "approval", pageData{Title: s.w.Request + " " + a.Card.BatchID, Who: se.who, CSRF: se.csrf, Approval: &a, Message: message,
		Fresh: s.assurance(se) == confirm.AssuranceSSO, Here: r.URL.Path, Passkeys: len(keys)})
}

// callForm checks a form posted about one call of a request: the
// session's own (its token), a call of the request of the path, which the
// person may see. It answers anything else itself (403, 404) and returns
// the call's reference.
func (s *Server) callForm(w http.ResponseWriter, r *http.Request, se session) (string, bool) {
	if !s.csrfOK(r, se) {
		s.page(w, http.StatusForbidden, "message", pageData{Title: s.w.RefusedTitle, Who: se.who, Message: s.w.ForeignForm})
		return "", false
	}
	id, ref := r.PathValue("id"), r.PostFormValue("ref")
	if b, _, err := confirm.ParseRef(ref); err != nil || b != id {
		s.notFound(w, r)
		return "", false
	}
	if _, err := s.console.Approval(r.Context(), id, se.who); err != nil {
		if errors.Is(err, confirm.ErrNotFound) {
			s.notFound(w, r)
		} else {
			s.fail(w, r, "approval", err)
		}
		return "", false
	}
	return ref, true
}

// decide takes an Allow or a Deny from the page: the session's own
// form, for a request the person may see; the decision is the core's.
func (s *Server) decide(w http.ResponseWriter, r *http.Request, se session) {
	ref, ok := s.callForm(w, r, se)
	if !ok {
		return
	}
	d := Decision{Ref: ref, Reason: strings.TrimSpace(r.PostFormValue("reason")), Phrase: r.PostFormValue("phrase"),
		Assurance: s.assurance(se)}
	switch r.PostFormValue("action") {
	case "allow":
		d.Allow = true
	case "deny":
	default:
		s.showApproval(w, r, se, http.StatusBadRequest, s.w.ChooseAllowOrDeny)
		return
	}
	if err := s.console.DecideOnPage(r.Context(), se.who, d); err != nil {
		s.log.Info("web: decision refused", "email", se.who.Email, "ref", ref, "err", err)
		s.showApproval(w, r, se, http.StatusConflict, s.say(err))
		return
	}
	s.log.Info("web: decided", "email", se.who.Email, "ref", ref, "allow", d.Allow)
	http.Redirect(w, r, "/ui/approvals/"+url.PathEscape(r.PathValue("id")), http.StatusSeeOther)
}

// editForm shows a call's Edit… form: the arguments to change, and what
// saving does for this person. A refusal (not theirs to allow, decided
// since) is said on the request's page.
func (s *Server) editForm(w http.ResponseWriter, r *http.Request, se session) {
	ref := r.URL.Query().Get("ref")
	if b, _, err := confirm.ParseRef(ref); err != nil || b != r.PathValue("id") {
		s.notFound(w, r)
		return
	}
	e, err := s.console.EditPage(r.Context(), se.who, ref, s.assurance(se))
	if err != nil {
		s.log.Info("web: edit form refused", "email", se.who.Email, "ref", ref, "err", err)
		s.showApproval(w, r, se, http.StatusConflict, s.say(err))
		return
	}
	s.page(w, http.StatusOK, "edit", pageData{Title: e.Form.Title, Who: se.who, CSRF: se.csrf, Edit: &e, BatchID: r.PathValue("id")})
}

// edit takes an Edit… from the page: the session's own form, for a call
// of a request the person may see; the edit is the core's. A refusal
// shows the form again with what was typed and why; nothing changed.
func (s *Server) edit(w http.ResponseWriter, r *http.Request, se session) {
	ref, ok := s.callForm(w, r, se)
	if !ok {
		return
	}
	id := r.PathValue("id")
	args := r.PostFormValue("args")
	a := s.assurance(se)
	if err := s.console.EditOnPage(r.Context(), se.who, Edit{Ref: ref, Args: args, Assurance: a}); err != nil {
		s.log.Info("web: edit refused", "email", se.who.Email, "ref", ref, "err", err)
		e, ferr := s.console.EditPage(r.Context(), se.who, ref, a)
		if ferr != nil { // no longer editable: say why on the request's page
			s.showApproval(w, r, se, http.StatusConflict, s.say(err))
			return
		}
		for i := range e.Form.Fields {
			e.Form.Fields[i].Value = args
		}
		s.page(w, http.StatusUnprocessableEntity, "edit", pageData{Title: e.Form.Title, Who: se.who, CSRF: se.csrf, Edit: &e, BatchID: id, Message: s.say(err)})
		return
	}
	s.log.Info("web: edited", "email", se.who.Email, "ref", ref)
	http.Redirect(w, r, "/ui/approvals/"+url.PathEscape(id), http.StatusSeeOther)
}

// assurance is what the session proves: a sign-in within FreshSignIn is
// sso; an older one, no more than a chat click.
func (s *Server) assurance(se session) confirm.Assurance {
	if !se.auth.IsZero() && s.now().Sub(se.auth) <= FreshSignIn {
		return confirm.AssuranceSSO
	}
	return confirm.AssuranceChat
}

// runPage shows a runbook run: its steps and their requests.
func (s *Server) runPage(w http.ResponseWriter, r *http.Request, se session) {
	run, err := s.console.RunPage(r.Context(), r.PathValue("id"), se.who)
	if errors.Is(err, confirm.ErrNotFound) {
		s.notFound(w, r)
		return
	} else if err != nil {
		s.fail(w, r, "run", err)
		return
	}
	s.page(w, http.StatusOK, "run", pageData{Title: s.w.Run + " " + run.Run.ID, Who: se.who, CSRF: se.csrf, Run: &run})
}

func (s *Server) notFound(w http.ResponseWriter, _ *http.Request) {
	s.page(w, http.StatusNotFound, "message", pageData{Title: s.w.NotFoundTitle, Message: s.w.NotFound, Link: "/ui/"})
}

// fail answers an error of Airlock's own: logged in detail, said safely.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, what string, err error) {
	s.log.Error("web: "+what, "path", r.URL.Path, "err", err)
	s.page(w, http.StatusInternalServerError, "message", pageData{Title: s.w.FailedTitle, Message: s.w.Failed})
}

// pageData is what a page's template reads.
type pageData struct {
	W        card.ConsoleWords // the console's words (page() sets them)
	Title    string
	Who      Who
	CSRF     string
	Message  string
	Link     string
	Waiting  []Entry
	Mine     []Entry
	Approval *Approval
	Fresh    bool   // the session's sign-in is fresh (a step-up of sso holds)
	Here     string // the page's path, for a sign-in to come back to
	Passkeys int    // how many passkeys the person has
	Auditor  bool   // the person may read the audit
	Audit    *auditView
	Run      *Run
	Edit     *EditPage
	BatchID  string // the request an edit form is of
}

func (s *Server) page(w http.ResponseWriter, status int, name string, d pageData) {
	if d.Who.Email != "" && s.audit != nil && s.cfg.Auditor(d.Who.Email) {
		d.Auditor = true
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	d.W = s.w
	if err := s.pages.ExecuteTemplate(w, name+".html", d); err != nil {
		s.log.Error("web: render", "page", name, "err", err)
	}
}

// token is 32 random bytes, URL-safe.
func token() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// hash is what storage keeps of a token: its SHA-256, in hex.
func hash(t string) string {
	sum := sha256.Sum256([]byte(t))
	return hex.EncodeToString(sum[:])
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
