// Package gatewaytest holds an in-memory gateway.Approvals for tests of
// the API and of the hooks that call it: approvals bound and consumed as
// the API's contract says, decided by the test as an approver would.
package gatewaytest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/airlockhq/airlock/gateway"
	"github.com/airlockhq/airlock/internal/jsonobj"
)

// Memory is an in-memory gateway.Approvals.
type Memory struct {
	// OnCreate, when set, decides a new approval before it is answered.
	OnCreate func(a *gateway.Approval)

	mu        sync.Mutex
	approvals map[string]*entry
	order     []string
	consumes  int
	results   map[string]string
	requests  []gateway.Request
}

type entry struct {
	gateway.Approval
	client   string
	req      gateway.Request
	consumed bool
	result   bool
}

var _ gateway.Approvals = (*Memory)(nil)

func canonical(raw json.RawMessage) string {
	c, _ := jsonobj.Canonical(raw)
	return string(c)
}

// Request binds or creates.
func (m *Memory) Request(_ context.Context, c gateway.Client, r gateway.Request) (gateway.Approval, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.approvals == nil {
		m.approvals, m.results = map[string]*entry{}, map[string]string{}
	}
	m.requests = append(m.requests, r)
	for _, id := range m.order {
		e := m.approvals[id]
		if e.client == c.Name && e.req.Session == r.Session && e.req.Tool == r.Tool && canonical(e.req.Args) == canonical(r.Args) &&
			(e.Status == gateway.StatusPending || e.Status == gateway.StatusAllowed && !e.consumed) {
			return e.Approval, nil
		}
	}
	id := fmt.Sprintf("a%d", len(m.order)+1)
	e := &entry{Approval: gateway.Approval{ID: id, Status: gateway.StatusPending, Args: r.Args,
		ExpiresAt: time.Now().Add(30 * time.Minute), CardURL: "https://slack.example/archives/C0OPS/p1"}, client: c.Name, req: r}
	if m.OnCreate != nil {
		m.OnCreate(&e.Approval)
	}
	m.approvals[id], m.order = e, append(m.order, id)
	return e.Approval, nil
}

func (m *Memory) find(c gateway.Client, id string) (*entry, error) {
	e, ok := m.approvals[id]
	if !ok || e.client != c.Name {
		return nil, gateway.ErrNotFound
	}
	return e, nil
}

// Get is the client's approval.
func (m *Memory) Get(_ context.Context, c gateway.Client, id string) (gateway.Approval, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, err := m.find(c, id)
	if err != nil {
		return gateway.Approval{}, err
	}
	return e.Approval, nil
}

// Consume carries an allowed approval out once.
func (m *Memory) Consume(_ context.Context, c gateway.Client, id string) (gateway.Approval, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, err := m.find(c, id)
	if err != nil {
		return gateway.Approval{}, err
	}
	if e.Status != gateway.StatusAllowed || e.consumed {
		return e.Approval, gateway.ErrNotConsumable
	}
	e.consumed = true
	m.consumes++
	return e.Approval, nil
}

// Result records a consumed approval's outcome, once.
func (m *Memory) Result(_ context.Context, c gateway.Client, id string, ok bool, output string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, err := m.find(c, id)
	if err != nil {
		return err
	}
	if !e.consumed || e.result {
		return gateway.ErrNotConsumable
	}
	e.result = true
	m.results[id] = fmt.Sprintf("%v %s", ok, output)
	return nil
}

// Pending counts the client's waiting approvals.
func (m *Memory) Pending(_ context.Context, c gateway.Client) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, e := range m.approvals {
		if e.client == c.Name && e.Status == gateway.StatusPending {
			n++
		}
	}
	return n, nil
}

// Decide decides approval id as an approver would (args: an edit).
func (m *Memory) Decide(id, status, reason string, args json.RawMessage) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.approvals[id]
	e.Status, e.Reason, e.DecidedBy = status, reason, "U0APPROVER"
	if args != nil {
		e.Args = args
	}
}

// MarkConsumed marks id consumed (as another retry would have).
func (m *Memory) MarkConsumed(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.approvals[id].consumed = true
}

// Counts are the approvals created and the consumes made.
func (m *Memory) Counts() (approvals, consumes int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.order), m.consumes
}

// Requests are the requests received, in order.
func (m *Memory) Requests() []gateway.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]gateway.Request(nil), m.requests...)
}

// Results are the recorded results by approval id ("true output").
func (m *Memory) Results() map[string]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]string{}
	for k, v := range m.results {
		out[k] = v
	}
	return out
}
