package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// The API's wire format (issue 36): JSON on `listen`, a client's bearer
// token on every request.

// Statuses of an approval.
const (
	StatusAllowed = "allowed"
	StatusDenied  = "denied"
	StatusPending = "pending"
	StatusExpired = "expired"
)

// Bounds of a request.
const (
	MaxArgsBytes  = 256 << 10        // a request's arguments; 413 past it
	MaxWait       = 60 * time.Second // the longest a request is held
	MaxReasonLen  = 2000             // runes of the agent's own words
	MaxIDLen      = 200              // runes of a session or call id
	MaxOutputLen  = 1 << 20          // bytes of a result's output read
	pollEvery     = 250 * time.Millisecond
	maxBodyOfRest = 64 << 10
)

// Request is the body of POST /v1/approvals.
type Request struct {
	Tool        string          `json:"tool"`
	Args        json.RawMessage `json:"args"`
	Session     string          `json:"session"`
	CallID      string          `json:"call_id,omitempty"`
	Reason      string          `json:"reason,omitempty"`
	Wait        string          `json:"wait,omitempty"`
	CallbackURL string          `json:"callback_url,omitempty"`
}

// Approval is the approval object every answer carries.
type Approval struct {
	ID        string          `json:"id"`
	Status    string          `json:"status"`
	Args      json.RawMessage `json:"args"`
	Reason    string          `json:"reason"`
	DecidedBy string          `json:"decided_by"`
	ExpiresAt time.Time       `json:"expires_at"`
	CardURL   string          `json:"card_url"`
	// Session and CallID are the request's, so that a callback's
	// receiver can tell which of its waits it ends.
	Session string `json:"session,omitempty"`
	CallID  string `json:"call_id,omitempty"`
}

// Result is the body of POST /v1/approvals/{id}/result.
type Result struct {
	OK     *bool  `json:"ok"`
	Output string `json:"output"`
}

// Approvals is what the API needs of the approval core; every call is
// for one client, and an id of another client's approval is not found.
type Approvals interface {
	// Request returns the client's approval bound to the request (same
	// session, tool and canonical arguments, pending or allowed and not
	// consumed), or creates one.
	Request(ctx context.Context, c Client, r Request) (Approval, error)
	Get(ctx context.Context, c Client, id string) (Approval, error)
	// Consume carries an allowed approval out, once: ErrNotConsumable
	// (with the approval) otherwise.
	Consume(ctx context.Context, c Client, id string) (Approval, error)
	Result(ctx context.Context, c Client, id string, ok bool, output string) error
	// Pending counts the client's waiting approvals.
	Pending(ctx context.Context, c Client) (int, error)
}

// Errors of Approvals the API answers with their own status.
var (
	ErrNotFound      = errors.New("no such approval")
	ErrNotConsumable = errors.New("the approval may not be carried out")
)

// Metrics is what the API records.
type Metrics interface {
	// GatewayUnauthorized counts a request refused for its token.
	GatewayUnauthorized()
}

// API serves /v1/approvals.
type API struct {
	Config    Config
	Approvals Approvals
	Metrics   Metrics
	Now       func() time.Time

	rates Limiter
}

// Handler is the API's routes.
func (a *API) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/approvals", a.authed(a.create))
	mux.HandleFunc("GET /v1/approvals/{id}", a.authed(a.get))
	mux.HandleFunc("POST /v1/approvals/{id}/consume", a.authed(a.consume))
	mux.HandleFunc("POST /v1/approvals/{id}/result", a.authed(a.result))
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func fail(w http.ResponseWriter, status int, format string, args ...any) {
	writeJSON(w, status, map[string]string{"error": fmt.Sprintf(format, args...)})
}

// authed finds the client by its bearer token: 401, with no detail, and
// counted, for a missing or wrong one.
func (a *API) authed(h func(w http.ResponseWriter, r *http.Request, c Client)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		c, found := a.Config.ByToken(strings.TrimSpace(token))
		if !ok || !found {
			if a.Metrics != nil {
				a.Metrics.GatewayUnauthorized()
			}
			fail(w, http.StatusUnauthorized, "unauthorized")
			return
		}
		h(w, r, c)
	}
}

// allow counts a request against the client's requests a minute.
func (a *API) allow(c Client) bool { return a.rates.Allow(c, a.Now()) }

// parseWait reads a wait ("25s"): at most MaxWait.
func parseWait(field, s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s: a duration such as 25s", field)
	}
	if d > MaxWait {
		return 0, fmt.Errorf("%s: at most %s", field, MaxWait)
	}
	return d, nil
}

func (a *API) create(w http.ResponseWriter, r *http.Request, c Client) {
	if !a.allow(c) {
		fail(w, http.StatusTooManyRequests, "over %d requests a minute (gateway.clients[].requests_per_minute)", c.RequestsPerMinute)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxArgsBytes+maxBodyOfRest+1))
	if err != nil {
		fail(w, http.StatusBadRequest, "body: %v", err)
		return
	}
	if len(body) > MaxArgsBytes+maxBodyOfRest {
		fail(w, http.StatusRequestEntityTooLarge, "args: over %d KiB", MaxArgsBytes>>10)
		return
	}
	var req Request
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		fail(w, http.StatusBadRequest, "body: %s", jsonError(err))
		return
	}
	if status, err := req.check(c); err != nil {
		fail(w, status, "%v", err)
		return
	}
	wait, _ := parseWait("wait", req.Wait)
	if n, err := a.Approvals.Pending(r.Context(), c); err != nil {
		fail(w, http.StatusServiceUnavailable, "Airlock cannot reach its database; nothing was created")
		return
	} else if n >= c.MaxPending {
		fail(w, http.StatusTooManyRequests, "%d approvals of this client wait already (gateway.clients[].max_pending)", n)
		return
	}
	ap, err := a.Approvals.Request(r.Context(), c, req)
	if err != nil {
		fail(w, http.StatusServiceUnavailable, "the request could not be recorded; nothing was created")
		return
	}
	a.answer(w, r, c, ap, wait)
}

// check validates a request, naming the field: its status, and the error.
func (req *Request) check(c Client) (int, error) {
	switch {
	case req.Tool == "" || len(req.Tool) > 200:
		return http.StatusBadRequest, errors.New("tool: required, at most 200 characters")
	case len(req.Args) == 0:
		return http.StatusBadRequest, errors.New("args: required (an object)")
	case len(req.Args) > MaxArgsBytes:
		return http.StatusRequestEntityTooLarge, fmt.Errorf("args: over %d KiB", MaxArgsBytes>>10)
	case !isObject(req.Args):
		return http.StatusBadRequest, errors.New("args: must be a JSON object")
	case req.Session == "" || len([]rune(req.Session)) > MaxIDLen:
		return http.StatusBadRequest, fmt.Errorf("session: required, at most %d characters", MaxIDLen)
	case len([]rune(req.CallID)) > MaxIDLen:
		return http.StatusBadRequest, fmt.Errorf("call_id: at most %d characters", MaxIDLen)
	case len([]rune(req.Reason)) > MaxReasonLen:
		return http.StatusBadRequest, fmt.Errorf("reason: at most %d characters", MaxReasonLen)
	}
	if req.CallbackURL != "" {
		// Refused rather than ignored: a durable runtime waiting on a
		// callback that never comes would wait forever.
		if err := c.CallbackAllowed(req.CallbackURL); err != nil {
			return http.StatusBadRequest, fmt.Errorf("callback_url: %w", err)
		}
	}
	if _, err := parseWait("wait", req.Wait); err != nil {
		return http.StatusBadRequest, err
	}
	return 0, nil
}

func isObject(raw json.RawMessage) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(raw, &m) == nil && m != nil
}

// jsonError says what is wrong with a body without echoing it.
func jsonError(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("not JSON (at byte %d)", se.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "not JSON (cut short, or empty)"
	case errors.As(err, &te):
		return fmt.Sprintf("%s: must be a %s", te.Field, te.Type)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return "unknown field " + strings.TrimPrefix(err.Error(), "json: unknown field ")
	}
	return "not a request"
}

func (a *API) get(w http.ResponseWriter, r *http.Request, c Client) {
	wait, err := parseWait("wait", r.URL.Query().Get("wait"))
	if err != nil {
		fail(w, http.StatusBadRequest, "%v", err)
		return
	}
	ap, err := a.Approvals.Get(r.Context(), c, r.PathValue("id"))
	if err != nil {
		a.failGet(w, err)
		return
	}
	a.answer(w, r, c, ap, wait)
}

// answer writes ap, held while it is pending for up to wait (polled:
// another replica may decide it).
func (a *API) answer(w http.ResponseWriter, r *http.Request, c Client, ap Approval, wait time.Duration) {
	deadline := a.Now().Add(wait)
	if wait > 0 {
		// The server's write timeout is for ordinary requests: a held one
		// may answer up to its wait later.
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(wait + 10*time.Second))
	}
	for ap.Status == StatusPending && a.Now().Before(deadline) {
		select {
		case <-r.Context().Done():
			return
		case <-time.After(min(pollEvery, deadline.Sub(a.Now()))):
		}
		next, err := a.Approvals.Get(r.Context(), c, ap.ID)
		if err != nil {
			break
		}
		ap = next
	}
	writeJSON(w, http.StatusOK, ap)
}

func (a *API) failGet(w http.ResponseWriter, err error) {
	if errors.Is(err, ErrNotFound) {
		fail(w, http.StatusNotFound, "no such approval")
		return
	}
	fail(w, http.StatusServiceUnavailable, "Airlock cannot reach its database")
}

func (a *API) consume(w http.ResponseWriter, r *http.Request, c Client) {
	ap, err := a.Approvals.Consume(r.Context(), c, r.PathValue("id"))
	switch {
	case errors.Is(err, ErrNotConsumable):
		why := ap.Status
		if ap.Status == StatusAllowed {
			why = "already consumed"
		}
		writeJSON(w, http.StatusConflict, map[string]any{"error": why, "id": ap.ID, "status": ap.Status})
	case err != nil:
		a.failGet(w, err)
	default:
		writeJSON(w, http.StatusOK, ap)
	}
}

func (a *API) result(w http.ResponseWriter, r *http.Request, c Client) {
	var res Result
	dec := json.NewDecoder(io.LimitReader(r.Body, MaxOutputLen+maxBodyOfRest))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&res); err != nil {
		fail(w, http.StatusBadRequest, "body: %s", jsonError(err))
		return
	}
	if res.OK == nil {
		fail(w, http.StatusBadRequest, "ok: required (true or false)")
		return
	}
	if err := a.Approvals.Result(r.Context(), c, r.PathValue("id"), *res.OK, res.Output); err != nil {
		if errors.Is(err, ErrNotConsumable) {
			fail(w, http.StatusConflict, "the approval was not consumed, or its result is recorded already")
			return
		}
		a.failGet(w, err)
		return
	}
	ap, err := a.Approvals.Get(r.Context(), c, r.PathValue("id"))
	if err != nil {
		a.failGet(w, err)
		return
	}
	writeJSON(w, http.StatusOK, ap)
}
