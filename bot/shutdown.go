package bot

import (
	"context"
	"errors"
)

// ErrShuttingDown: the process is stopping and takes no new turns or clicks.
var ErrShuttingDown = errors.New("airlock is shutting down")

// RestartingMessage answers a turn that arrives while the process stops.
const RestartingMessage = "Airlock is restarting and did not take this message. Write again in a minute."

// enter registers work about to start (a turn, a click, a sweep); false
// once Shutdown began. Every true is paired with leave.
func (b *Bot) enter() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopping {
		return false
	}
	b.work.Add(1)
	return true
}

func (b *Bot) leave() { b.work.Done() }

// enterClick enters for a click (ErrShuttingDown when stopping) and finds
// its target with resolve; the caller defers leave when err is nil.
func (b *Bot) enterClick(ctx context.Context, c Click, resolve func(context.Context, Click) (clicked, error)) (t clicked, leave func(), err error) {
	if !b.enter() {
		return clicked{}, nil, ErrShuttingDown
	}
	if t, err = resolve(ctx, c); err != nil {
		b.leave()
		return clicked{}, nil, err
	}
	return t, b.leave, nil
}

// Shutdown stops taking turns and clicks, then waits for the work already
// started (tool runs included, which are never cancelled once started) to
// finish, or for ctx to end. Work cut off by the process exiting is
// recovered at the next start (a run found running becomes unknown).
func (b *Bot) Shutdown(ctx context.Context) error {
	b.mu.Lock()
	b.stopping = true
	b.mu.Unlock()
	done := make(chan struct{})
	go func() { b.work.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
