package slack

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/slack-go/slack"
)

// Request signing (https://api.slack.com/authentication/verifying-requests-from-slack).
const (
	headerSignature = "X-Slack-Signature"
	headerTimestamp = "X-Slack-Request-Timestamp"
	headerRetryNum  = "X-Slack-Retry-Num"
	headerRetryWhy  = "X-Slack-Retry-Reason"

	// MaxSignatureAge is how far a request's timestamp may be from now
	// (slack-go's window, checked by slack.NewSecretsVerifier).
	MaxSignatureAge = 5 * time.Minute
)

// Signature errors.
var (
	ErrNoSignature    = errors.New("slack: request not signed")
	ErrStaleSignature = errors.New("slack: request timestamp too old or in the future")
	ErrBadSignature   = errors.New("slack: request signature does not match")
)

// VerifySignature checks Slack's v0 signature of a request with slack-go's
// slack.NewSecretsVerifier: an HMAC-SHA256 with the signing secret over
// "v0:<timestamp>:<raw body>", the timestamp within MaxSignatureAge of the
// local clock. Before that it insists on the one spelling Slack writes, so
// a signature has exactly one accepted form: the timestamp is Unix seconds
// in digits only (no sign, no spaces) and the signature "v0=" and 64
// lower-case hex digits. An empty secret verifies nothing.
func VerifySignature(secret string, h http.Header, body []byte) error {
	if secret == "" {
		return errors.New("slack: no signing secret configured")
	}
	ts, sig := h.Get(headerTimestamp), h.Get(headerSignature)
	if ts == "" || sig == "" {
		return ErrNoSignature
	}
	if !digits(ts, 12) {
		return fmt.Errorf("%w: malformed timestamp", ErrBadSignature)
	}
	hexSig, ok := strings.CutPrefix(sig, "v0=")
	if !ok {
		return fmt.Errorf("%w: unknown version", ErrBadSignature)
	}
	if len(hexSig) != 2*sha256.Size || !lowerHex(hexSig) {
		return fmt.Errorf("%w: malformed", ErrBadSignature)
	}
	sv, err := slack.NewSecretsVerifier(h, secret)
	switch {
	case errors.Is(err, slack.ErrExpiredTimestamp):
		return ErrStaleSignature
	case errors.Is(err, slack.ErrMissingHeaders):
		return ErrNoSignature
	case err != nil:
		return fmt.Errorf("%w: %v", ErrBadSignature, err)
	}
	if _, err := sv.Write(body); err != nil {
		return fmt.Errorf("%w: %v", ErrBadSignature, err)
	}
	if err := sv.Ensure(); err != nil {
		return ErrBadSignature
	}
	return nil
}

// digits reports whether s is 1 to n ASCII digits.
func digits(s string, n int) bool {
	if s == "" || len(s) > n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// lowerHex reports whether s is lower-case hex digits only.
func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if (s[i] < '0' || s[i] > '9') && (s[i] < 'a' || s[i] > 'f') {
			return false
		}
	}
	return true
}

// Sign computes the v0 signature bytes of a body at a timestamp, as Slack
// does, for tests and tools that sign requests to Airlock (written
// "v0=<lower-case hex>"). Airlock itself only verifies, with slack-go.
func Sign(secret, timestamp string, body []byte) []byte {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte("v0:" + timestamp + ":"))
	mac.Write(body)
	return mac.Sum(nil)
}

// Handler serves POST /slack/events in http mode: Events API callbacks
// (JSON) and interactivity payloads (form field "payload") on one URL, as
// Bolt does. Every request is verified against the signing secret before
// anything in it is parsed (401 otherwise); url_verification is answered;
// events and clicks are recorded in the inbox (one small insert: see
// inbox.go), then acknowledged with an empty 200, sent before their work
// is even queued, and worked on in the background. What could not be
// recorded is answered 503: Slack shows a click failed (its clicker is
// also told why), and sends an event again (on its last try it is
// acknowledged and its thread told nothing was done). The one exception
// to the ack first is the edit modal's submission, answered with the
// edit's outcome within Slack's 3 seconds (see submitAnswered). A malformed
// or unknown payload gets 400 and changes nothing. Mount it at
// "/slack/events".
func (a *Adapter) Handler() http.Handler {
	return http.HandlerFunc(a.serveHTTP)
}

func (a *Adapter) serveHTTP(w http.ResponseWriter, r *http.Request) {
	received := time.Now()
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			http.Error(w, "request too large", http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "could not read the request", http.StatusBadRequest)
		return
	}
	if err := VerifySignature(a.cfg.SigningSecret, r.Header, body); err != nil {
		a.log.Warn("slack: request rejected", "why", err, "remote", r.RemoteAddr)
		http.Error(w, "invalid signature", http.StatusUnauthorized)
		return
	}
	retry, _ := strconv.Atoi(r.Header.Get(headerRetryNum))
	mediaType, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch mediaType {
	case "application/x-www-form-urlencoded":
		a.serveInteraction(w, body, received)
	case "application/json":
		a.serveEvent(w, body, retry, r.Header.Get(headerRetryWhy), received)
	default:
		http.Error(w, "unsupported content type", http.StatusUnsupportedMediaType)
	}
}

// ack answers a delivery with an empty 200 and sends it at once, so the
// acknowledgment is on its way before any work on the delivery starts.
func (a *Adapter) ack(w http.ResponseWriter, received time.Time) {
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(http.StatusOK)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	a.acked(received)
}

func (a *Adapter) serveEvent(w http.ResponseWriter, body []byte, retry int, retryWhy string, received time.Time) {
	req, err := parseEvent(body)
	if err != nil {
		a.log.Warn("slack: event rejected", "err", err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if req.Type == envelopeURLVerification {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"challenge": req.Challenge})
		return
	}
	self := a.identity()
	if self.UserID == "" {
		http.Error(w, "not started", http.StatusServiceUnavailable) // Slack retries
		return
	}
	if req.Type == envelopeEventCallback && !a.ourTeam(req.TeamID, "event") {
		a.ack(w, received) // acknowledged, so not retried; nothing done
		return
	}
	act, err := classify(req, self)
	if err != nil {
		a.log.Warn("slack: event rejected", "err", err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if retry > 0 {
		a.log.Info("slack: retried delivery", "event", req.EventID, "retry", retry, "reason", retryWhy)
	}
	if act.Kind == actIgnore {
		a.ack(w, received)
		return
	}
	d, first, err := a.recordEvent(act, req.EventID, body)
	if err != nil {
		a.log.Warn("slack: event not recorded", "event", req.EventID, "retry", retry, "err", err)
		if retry < lastRetry {
			http.Error(w, "could not record the event; send it again", http.StatusServiceUnavailable)
			return
		}
		a.ack(w, received) // Slack's last try: tell the thread instead
		a.spawn("event "+req.EventID+" not recorded", func(ctx context.Context) { a.notRecorded(ctx, act) })
		return
	}
	if !first {
		a.log.Info("slack: retried event recorded already; ignored", "event", req.EventID, "retry", retry)
		a.ack(w, received)
		return
	}
	if d != nil {
		act.Turn.Inbox = d.Key
	}
	queue := a.reserve()
	a.ack(w, received)
	a.trace("slack-acked-event")
	queue("event "+req.EventID, func(ctx context.Context) {
		defer a.finish(d)
		a.handleEvent(ctx, act, retry)
	})
}

func (a *Adapter) serveInteraction(w http.ResponseWriter, body []byte, received time.Time) {
	form, err := url.ParseQuery(string(body))
	if err != nil {
		http.Error(w, "malformed form body", http.StatusBadRequest)
		return
	}
	payload := form.Get("payload")
	if payload == "" {
		// Slash commands and other form posts are not Airlock's.
		http.Error(w, "no interaction payload", http.StatusBadRequest)
		return
	}
	if a.identity().UserID == "" {
		http.Error(w, "not started", http.StatusServiceUnavailable)
		return
	}
	in, err := parseInteraction([]byte(payload))
	if err != nil {
		a.log.Warn("slack: interaction rejected", "err", err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	// An empty 200 acknowledges a click and closes a submitted modal.
	if !a.ourTeam(in.Team, "interaction") {
		a.ack(w, received)
		return // no effect
	}
	d, _, err := a.record(deliveryInteraction, interactionKey(), []byte(payload))
	if err != nil {
		a.log.Warn("slack: interaction not recorded", "user", in.User, "err", err)
		http.Error(w, "could not record the interaction", http.StatusServiceUnavailable)
		a.spawn("interaction not recorded", func(ctx context.Context) {
			a.ephemeral(ctx, in.Channel, in.Thread, in.User, notRecordedClick)
		})
		return
	}
	in.delivery = d
	if in.answered() {
		a.serveEdit(w, in, received)
		return
	}
	queue := a.reserve()
	a.ack(w, received)
	a.trace("slack-acked-interaction")
	queue("interaction", func(ctx context.Context) {
		defer a.finish(d)
		a.interact(ctx, in)
	})
}

// serveEdit answers the edit modal's submission with the edit's outcome:
// the one delivery whose acknowledgment waits on work (see submitAnswered).
// A refused edit gets response_action "errors" and the modal stays open;
// otherwise an empty 200 closes it, and a failure is told ephemerally.
func (a *Adapter) serveEdit(w http.ResponseWriter, in interaction, received time.Time) {
	a.wg.Add(1)
	defer a.wg.Done()
	ans := a.submitAnswered(a.context(), in)
	var queue func(string, func(context.Context))
	if ans.notify != "" {
		queue = a.reserve()
	}
	if body := ans.payload(); body != nil {
		raw, _ := json.Marshal(body) // strings only: cannot fail
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.Header().Set("Content-Length", strconv.Itoa(len(raw)))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(raw)
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		a.acked(received)
	} else {
		a.ack(w, received)
	}
	if queue != nil {
		queue("edit answer", func(ctx context.Context) { a.ephemeral(ctx, in.Channel, in.Thread, in.User, ans.notify) })
	}
}
