package modeltest

import (
	"context"
	"sync"
	"time"

	"github.com/airlockhq/airlock/model"
)

// Notices records the wait notices a retrying model gives (model.WithWaitNotice):
// each wait and the error behind it. Read the fields once the call returned.
type Notices struct {
	mu    sync.Mutex
	Waits []time.Duration
	Errs  []error
}

// Ctx is ctx with n receiving its wait notices.
func (n *Notices) Ctx(ctx context.Context) context.Context {
	return model.WithWaitNotice(ctx, func(wait time.Duration, err error) {
		n.mu.Lock()
		defer n.mu.Unlock()
		n.Waits = append(n.Waits, wait)
		n.Errs = append(n.Errs, err)
	})
}
