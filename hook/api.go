package hook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/airlockhq/airlock/gateway"
)

// The API's wire format is package gateway's (which imports nothing of
// the server): the request, the approval object and its statuses.
type (
	Request  = gateway.Request
	Approval = gateway.Approval
)

// Statuses of an approval.
const (
	StatusAllowed = gateway.StatusAllowed
	StatusDenied  = gateway.StatusDenied
	StatusPending = gateway.StatusPending
	StatusExpired = gateway.StatusExpired
)

// APIError is an answer of the API other than the one asked for: its
// status and its {"error"} text.
type APIError struct {
	Status int
	Text   string
}

func (e *APIError) Error() string {
	if e.Text == "" {
		return fmt.Sprintf("Airlock answered %d", e.Status)
	}
	return fmt.Sprintf("Airlock answered %d: %s", e.Status, e.Text)
}

// ErrConflict is Consume's answer for an approval that may not be
// carried out (already consumed, pending, denied, expired).
var ErrConflict = errors.New("the approval may not be carried out")

// maxAnswer bounds an answer read from the API.
const maxAnswer = 1 << 20

// Client talks to Airlock's approval API as one client (its token).
type Client struct {
	URL   string // Airlock's base URL; the client adds /v1/approvals
	Token string
	HTTP  *http.Client
}

// Create asks for approval of one call; wait > 0 holds the request until
// it is decided or the wait runs out.
func (c *Client) Create(ctx context.Context, r Request, wait time.Duration) (Approval, error) {
	if wait > 0 {
		r.Wait = wait.Round(time.Second).String()
	}
	body, err := json.Marshal(r)
	if err != nil {
		return Approval{}, err
	}
	return c.do(ctx, http.MethodPost, "/v1/approvals", body, http.StatusOK)
}

// Get is the approval, long-polled for up to wait while it is pending.
func (c *Client) Get(ctx context.Context, id string, wait time.Duration) (Approval, error) {
	p := "/v1/approvals/" + url.PathEscape(id)
	if wait > 0 {
		p += "?wait=" + url.QueryEscape(wait.Round(time.Second).String())
	}
	return c.do(ctx, http.MethodGet, p, nil, http.StatusOK)
}

// Consume carries an allowed approval out, once: ErrConflict (with the
// approval as the server has it) when it may not be.
func (c *Client) Consume(ctx context.Context, id string) (Approval, error) {
	a, err := c.do(ctx, http.MethodPost, "/v1/approvals/"+url.PathEscape(id)+"/consume", nil, http.StatusOK)
	var ae *APIError
	if errors.As(err, &ae) && ae.Status == http.StatusConflict {
		return a, fmt.Errorf("%w: %s", ErrConflict, ae.Text)
	}
	return a, err
}

func (c *Client) do(ctx context.Context, method, path string, body []byte, want int) (Approval, error) {
	base := strings.TrimRight(c.URL, "/")
	req, err := http.NewRequestWithContext(ctx, method, base+path, bytes.NewReader(body))
	if err != nil {
		return Approval{}, fmt.Errorf("the Airlock URL: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		// The error names the URL, never the token (it is a header).
		return Approval{}, fmt.Errorf("could not reach Airlock: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return Approval{}, fmt.Errorf("read Airlock's answer: %w", err)
	}
	var a Approval
	if resp.StatusCode != want {
		var e struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal(raw, &e)
		_ = json.Unmarshal(raw, &a) // a 409 carries the approval's status
		return a, &APIError{Status: resp.StatusCode, Text: oneLine(e.Error, 200)}
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return Approval{}, fmt.Errorf("the answer from Airlock is not an approval: %w", err)
	}
	if a.ID == "" || a.Status == "" {
		return Approval{}, errors.New("the answer from Airlock is not an approval: no id or status")
	}
	return a, nil
}

// oneLine is s on one line, at most n runes: text from the server shown
// to the agent.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		s = string(r[:n]) + "…"
	}
	return s
}
