package bot_test

import (
	"context"
	"sync"
	"testing"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/bot/bottest"
	cardpkg "github.com/airlockhq/airlock/card"
)

// homePlatform is the test platform with home views: it keeps each
// person's published views, in order.
type homePlatform struct {
	*bottest.Platform
	mu    sync.Mutex
	homes map[string][]cardpkg.Home
}

var _ bot.HomePublisher = (*homePlatform)(nil)

func (p *homePlatform) PublishHome(_ context.Context, user string, h cardpkg.Home) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.homes[user] = append(p.homes[user], h)
	return nil
}

func (p *homePlatform) published(user string) []cardpkg.Home {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]cardpkg.Home(nil), p.homes[user]...)
}

// A home view, once opened, is published again when a request it lists
// changes: the approver's when a call starts waiting on them and when it
// is decided, the requester's with their request; a person the request
// is not about gets nothing new. A platform without home views refuses
// to open one.
func TestHomeViewsKeptCurrent(t *testing.T) {
	h := newHarness(t, "")
	ctx := context.Background()
	if err := h.bot.HomeOpened(ctx, "test", "alice"); err == nil {
		t.Fatal("a platform without home views opened one")
	}
	hp := &homePlatform{Platform: h.plat, homes: map[string][]cardpkg.Home{}}
	h.bot.Register("test", hp)
	for _, u := range []string{"alice", "bob", "dave"} {
		if err := h.bot.HomeOpened(ctx, "test", u); err != nil {
			t.Fatal(err)
		}
		if got := hp.published(u); len(got) != 1 || len(got[0].Waiting)+len(got[0].Mine) != 0 {
			t.Fatalf("%s's home on opening: %+v", u, got)
		}
	}
	h.push(calls(tc("a", "deploy", `{}`)), text("deployed"))
	h.turn("bob", "deploy")
	eventually(t, "alice's home listing the call", func() bool {
		got := hp.published("alice")
		return len(got[len(got)-1].Waiting) == 1
	})
	eventually(t, "bob's home listing his request", func() bool {
		got := hp.published("bob")
		return len(got[len(got)-1].Mine) == 1
	})
	if err := h.click("alice", 1, true, ""); err != nil {
		t.Fatal(err)
	}
	eventually(t, "alice's home with nothing waiting", func() bool {
		got := hp.published("alice")
		return len(got[len(got)-1].Waiting) == 0
	})
	if got := hp.published("dave"); len(got) != 1 {
		t.Fatalf("dave's home, about none of it, published %d times", len(got))
	}
}
