// Package callback receives Airlock's approval callbacks (docs/hooks.md,
// "Callbacks"): the standard library only, to copy into a service of your
// own. Handler checks each callback's Airlock-Signature against the
// client's callback_secret and hands the approval to a function; an
// error from it answers 500, so Airlock sends the callback again later.
// Delivery is at least once: make what the function does idempotent
// (a Temporal signal the workflow reads once, a LangGraph resume of an
// interrupt that is no longer waiting).
package callback

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Approval is the approval object Airlock POSTs once it is decided.
type Approval struct {
	ID        string          `json:"id"`
	Status    string          `json:"status"` // allowed, denied or expired
	Args      json.RawMessage `json:"args"`   // what may run: the request's, or an approver's edit
	Reason    string          `json:"reason"`
	DecidedBy string          `json:"decided_by"`
	ExpiresAt time.Time       `json:"expires_at"`
	CardURL   string          `json:"card_url"`
	Session   string          `json:"session"`
	CallID    string          `json:"call_id"`
}

// Tolerance is how old a signature may be.
const Tolerance = 5 * time.Minute

// Handler answers Airlock's callbacks signed with secret: 401 for a
// signature that does not verify (or is older than Tolerance), 400 for a
// body that is not an approval, 500 when deliver fails, 204 once it
// succeeded. The event id (Airlock-Event-Id) is the same in every attempt
// of one callback.
func Handler(secret string, deliver func(ctx context.Context, eventID string, a Approval, r *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil || r.Method != http.MethodPost {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		if !Verify(secret, r.Header.Get("Airlock-Signature"), body, time.Now()) {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var a Approval
		if err := json.Unmarshal(body, &a); err != nil || a.ID == "" || a.Status == "" {
			http.Error(w, "not an approval", http.StatusBadRequest)
			return
		}
		if err := deliver(r.Context(), r.Header.Get("Airlock-Event-Id"), a, r); err != nil {
			http.Error(w, "not delivered; send it again", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// Verify checks an Airlock-Signature header ("t=<unix seconds>,v1=<hex
// HMAC-SHA256 of "<t>.<body>">") against body, and that t is within
// Tolerance of now.
func Verify(secret, header string, body []byte, now time.Time) bool {
	var ts string
	var sigs []string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sigs = append(sigs, v)
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return false
	}
	if d := now.Sub(time.Unix(sec, 0)); d > Tolerance || d < -Tolerance {
		return false
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts + "."))
	m.Write(body)
	want := m.Sum(nil)
	for _, s := range sigs {
		if got, err := hex.DecodeString(s); err == nil && hmac.Equal(got, want) {
			return true
		}
	}
	return false
}
