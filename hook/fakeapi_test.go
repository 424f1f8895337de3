package hook

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/gateway"
	"github.com/airlockhq/airlock/gateway/gatewaytest"
)

// fakeAPI is Airlock's approval API as package gateway serves it, on
// 127.0.0.1, over approvals kept in memory (gatewaytest.Memory: bound and
// consumed as the API's contract says), decided by the test as an
// approver would.
type fakeAPI struct {
	srv   *httptest.Server
	mem   *gatewaytest.Memory
	token string
}

func newFakeAPI(t *testing.T) *fakeAPI { return newFakeAPIOver(t, &gatewaytest.Memory{}, nil) }

func newFakeAPIOver(t *testing.T, mem *gatewaytest.Memory, approvals gateway.Approvals) *fakeAPI {
	t.Helper()
	f := &fakeAPI{mem: mem, token: strings.Repeat("t", 40)}
	if approvals == nil {
		approvals = mem
	}
	cfg := gateway.Config{Clients: []gateway.Client{{Name: "alice-laptop", Token: f.token, ActsFor: "U0ALICE",
		Channel: gateway.ChannelRef{Platform: "slack", ID: "C0OPS"}, Ask: []string{"*"}}}}
	cfg.SetDefaults()
	f.srv = httptest.NewServer((&gateway.API{Config: cfg, Approvals: approvals, Now: time.Now}).Handler())
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAPI) decide(id, status, reason string) { f.mem.Decide(id, status, reason, nil) }

func (f *fakeAPI) counts() (approvals, consumes int) { return f.mem.Counts() }

func (f *fakeAPI) requests() []gateway.Request { return f.mem.Requests() }

// consumedFirst is approvals whose allowed approval another retry
// consumes just before this one does.
type consumedFirst struct{ *gatewaytest.Memory }

func (c consumedFirst) Consume(ctx context.Context, cl gateway.Client, id string) (gateway.Approval, error) {
	c.MarkConsumed(id)
	return c.Memory.Consume(ctx, cl, id)
}
