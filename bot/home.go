package bot

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/web"
)

// Home views (Slack's Home tab). A person who opens theirs gets it
// published, and from then on it is a card-sync message (kind home): a
// change of a request it lists (posted, voted, decided, expired, run)
// records a change of the home of the requester and of each person
// who may decide it, and card sync publishes it again, under the
// platform's rate limits like any card.

// maxHomeItems bounds each list of a home view.
const maxHomeItems = 40

// homesTTL is how long a process trusts its list of the homes opened (a
// home opened on another replica is kept current after at most this).
const homesTTL = 30 * time.Second

// HomePublisher publishes a person's home view (Slack's views.publish).
// Its errors are classified as UpdateCard's: a *RateLimitedError (its
// Scope confirm.HomeChannel), ErrMessageGone for a person the platform no
// longer has.
type HomePublisher interface {
	PublishHome(ctx context.Context, user string, h card.Home) error
}

// homes is the process's list of the homes opened, by platform, read from
// storage at most every homesTTL.
type homes struct {
	mu    sync.Mutex
	at    map[string]time.Time
	users map[string][]string
}

// Home is a person's home view on a platform (Slack's Home tab): the
// requests waiting on them there and their own, as the console's inbox
// lists them, each with its card's link and, with the console, its page.
func (b *Bot) Home(ctx context.Context, platform, user string) (card.Home, error) {
	es, err := b.inbox(ctx, web.Who{IDs: map[string]string{platform: user}}) // only the platform's requests are visible
	if err != nil {
		return card.Home{}, err
	}
	var h card.Home
	for _, e := range es {
		item := card.HomeItem{BatchID: e.BatchID, Tools: e.Tools, Waiting: e.Waiting, Channel: e.Channel, Requester: e.Requester,
			ExpiresAt: e.ExpiresAt, PageURL: b.consoleURL(e.BatchID), CardURL: b.cardURL(ctx, e.conv, e.batch)}
		if e.MayDecide && e.Waiting > 0 && len(h.Waiting) < maxHomeItems {
			h.Waiting = append(h.Waiting, item)
		}
		if e.Mine && len(h.Mine) < maxHomeItems {
			h.Mine = append(h.Mine, item)
		}
	}
	return h, nil
}

// HomeOpened is a person opening their home view on a platform: it is
// stored as opened (kept current from now on) and published through card
// sync. A platform that cannot publish home views is an error.
func (b *Bot) HomeOpened(ctx context.Context, platform, user string) error {
	p, err := b.platform(platform)
	if err != nil {
		return err
	}
	if _, ok := p.(HomePublisher); !ok {
		return fmt.Errorf("home views: platform %s cannot publish them", platform)
	}
	k := confirm.HomeKey{Platform: platform, User: user}
	if err := b.store.OpenHome(ctx, k); err != nil {
		return err
	}
	b.hs.mu.Lock()
	if !slices.Contains(b.hs.users[platform], user) {
		b.hs.users[platform] = append(b.hs.users[platform], user)
	}
	b.hs.mu.Unlock()
	b.syncSubject(ctx, confirm.Subject{Kind: confirm.SubjectHome, ID: k.ID()})
	return nil
}

// openHomes lists the users of a platform who opened their home view.
func (b *Bot) openHomes(ctx context.Context, platform string) []string {
	b.hs.mu.Lock()
	defer b.hs.mu.Unlock()
	if at, ok := b.hs.at[platform]; ok && b.now().Sub(at) < homesTTL {
		return slices.Clone(b.hs.users[platform])
	}
	ks, err := b.store.OpenHomes(ctx, platform)
	if err != nil {
		b.log.Error("list the home views opened; trying again at the next change", "platform", platform, "err", err)
		return slices.Clone(b.hs.users[platform])
	}
	users := make([]string, len(ks))
	for i, k := range ks {
		users[i] = k.User
	}
	b.hs.users[platform], b.hs.at[platform] = users, b.now()
	return slices.Clone(users)
}

// homesChanged records a change of the home views that list batch (its
// requester's, and each of whose person may decide a call of it) and
// publishes them through card sync, in the background. Without a home
// opened on the platform it costs no query (the list is read every
// homesTTL).
func (b *Bot) homesChanged(ctx context.Context, conv confirm.Conversation, batch *confirm.Batch) {
	users := b.openHomes(ctx, conv.Platform)
	if len(users) == 0 || batch == nil {
		return
	}
	var changed []confirm.Subject
	for _, u := range users {
		if u == batch.RequestedBy || slices.ContainsFunc(batch.Calls, func(c confirm.Call) bool {
			return c.Flagged && b.mayDecide(ctx, conv, batch, c, u, nil)
		}) {
			changed = append(changed, confirm.Subject{Kind: confirm.SubjectHome, ID: confirm.HomeKey{Platform: conv.Platform, User: u}.ID()})
		}
	}
	if len(changed) == 0 || !b.enter() {
		return
	}
	go func() {
		defer b.leave()
		ctx := context.WithoutCancel(ctx)
		for _, s := range changed {
			b.syncSubject(ctx, s)
		}
	}()
}

// renderHome publishes the home view of the person k names.
func (b *Bot) renderHome(ctx context.Context, k confirm.HomeKey) error {
	p, err := b.platform(k.Platform)
	if err != nil {
		return err
	}
	hp, ok := p.(HomePublisher)
	if !ok {
		return nil
	}
	h, err := b.Home(ctx, k.Platform, k.User)
	if err != nil {
		return err
	}
	return hp.PublishHome(ctx, k.User, h)
}
