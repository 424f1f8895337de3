package bot

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// LeaseTTL is how long a conversation's lease lives without renewal: a
// replica that dies holding it frees the conversation after this long.
const LeaseTTL = 15 * time.Second

// keyedMutex serialises work per key inside one process.
type keyedMutex struct {
	mu    sync.Mutex
	locks map[int64]*keyedEntry
}

type keyedEntry struct {
	mu   sync.Mutex
	refs int
}

func (k *keyedMutex) entry(key int64) *keyedEntry {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.locks == nil {
		k.locks = map[int64]*keyedEntry{}
	}
	e := k.locks[key]
	if e == nil {
		e = &keyedEntry{}
		k.locks[key] = e
	}
	e.refs++
	return e
}

func (k *keyedMutex) put(key int64, e *keyedEntry) {
	k.mu.Lock()
	defer k.mu.Unlock()
	e.refs--
	if e.refs == 0 {
		delete(k.locks, key)
	}
}

// lock waits for key; tryLock gives up at once when it is held.
func (k *keyedMutex) lock(key int64) func() {
	e := k.entry(key)
	e.mu.Lock()
	return func() { e.mu.Unlock(); k.put(key, e) }
}

func (k *keyedMutex) tryLock(key int64) (func(), bool) {
	e := k.entry(key)
	if !e.mu.TryLock() {
		k.put(key, e)
		return nil, false
	}
	return func() { e.mu.Unlock(); k.put(key, e) }, true
}

func leaseKey(convID int64) string { return fmt.Sprintf("conversation:%d", convID) }

// lockConversation makes this worker the only one, in this process and
// across replicas, working on the conversation: an in-process mutex plus a
// lease in the database, renewed while held (only the mutex when the
// database serves a single process). It waits until both are had or ctx
// ends.
func (b *Bot) lockConversation(ctx context.Context, convID int64) (func(), error) {
	unlock := b.turns.lock(convID)
	if b.cfg.SingleProcess {
		return unlock, nil
	}
	for {
		ok, err := b.store.AcquireLease(ctx, leaseKey(convID), b.cfg.WorkerID, LeaseTTL)
		if err != nil {
			unlock()
			return nil, fmt.Errorf("conversation lease: %w", err)
		}
		if ok {
			return b.holdLease(convID, unlock), nil
		}
		select {
		case <-ctx.Done():
			unlock()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// tryLockConversation is lockConversation without waiting.
func (b *Bot) tryLockConversation(ctx context.Context, convID int64) (func(), bool, error) {
	unlock, ok := b.turns.tryLock(convID)
	if !ok {
		return nil, false, nil
	}
	if b.cfg.SingleProcess {
		return unlock, true, nil
	}
	got, err := b.store.AcquireLease(ctx, leaseKey(convID), b.cfg.WorkerID, LeaseTTL)
	if err != nil || !got {
		unlock()
		return nil, false, err
	}
	return b.holdLease(convID, unlock), true, nil
}

// holdLease renews the lease until the returned release is called.
func (b *Bot) holdLease(convID int64, unlock func()) func() {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(LeaseTTL / 3)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				ctx, cancel := context.WithTimeout(context.Background(), LeaseTTL/3)
				ok, err := b.store.AcquireLease(ctx, leaseKey(convID), b.cfg.WorkerID, LeaseTTL)
				cancel()
				if err != nil || !ok {
					b.log.Error("conversation lease lost", "conversation", convID, "err", err)
				}
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(stop)
			<-done
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := b.store.ReleaseLease(ctx, leaseKey(convID), b.cfg.WorkerID); err != nil {
				b.log.Error("release conversation lease", "conversation", convID, "err", err)
			}
			unlock()
		})
	}
}
