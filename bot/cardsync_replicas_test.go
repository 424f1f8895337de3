package bot_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/bot/bottest"
	"github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/internal/pgtest"
	"github.com/airlockhq/airlock/internal/racetest"
	"github.com/airlockhq/airlock/model/modeltest"
	"github.com/airlockhq/airlock/storage"
)

// overlapPlatform records card updates and fails the test when two
// requests for one message are in flight at once (across replicas: both
// bots share it, as they share Slack).
type overlapPlatform struct {
	bottest.Platform
	t        *testing.T
	mu       sync.Mutex
	inFlight map[string]bool
	last     map[string]card.Card
	sends    int
	peak     racetest.Peak
}

func (p *overlapPlatform) UpdateCard(ctx context.Context, th bot.Thread, ref string, c card.Card) error {
	p.mu.Lock()
	if p.inFlight[ref] {
		p.t.Errorf("two updates of %s in flight at once", ref)
	}
	p.inFlight[ref] = true
	p.sends++
	p.mu.Unlock()
	leave := p.peak.Enter()
	time.Sleep(3 * time.Millisecond) // a platform's round trip
	leave()
	p.mu.Lock()
	p.inFlight[ref] = false
	p.last[ref] = c
	p.mu.Unlock()
	return nil
}

// Two replicas on one PostgreSQL sync the same cards at once (each
// change rendered by both bots' entries and jobs): never two requests for
// one message in flight together, and every card ends showing its
// batch's final state.
func TestCardSyncTwoReplicasPostgres(t *testing.T) {
	pg := os.Getenv("AIRLOCK_TEST_POSTGRES_DSN")
	if pg == "" {
		t.Skip("set AIRLOCK_TEST_POSTGRES_DSN (CI does) to run the replica test")
	}
	dsn := pgtest.FreshSchema(t, pg, "cardsync")
	ctx := context.Background()
	plat := &overlapPlatform{t: t, inFlight: map[string]bool{}, last: map[string]card.Card{}}
	var bots []*bot.Bot
	var dbs []*storage.DB
	m := modeltest.NewScripted()
	for i := range 2 {
		db, err := storage.Open(ctx, "postgres", dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		var mu sync.Mutex
		b, err := bot.New(bot.Config{
			Store: db, Model: m, Tools: toolSet{"deploy": {Name: "deploy", Confirms: true, Log: &[]string{}, Mu: &mu}},
			Channels: bot.NewChannels([]bot.Channel{{Platform: "test", ID: "C1", Approvers: []string{"alice"}}}),
			Timeout:  time.Hour, WorkerID: fmt.Sprintf("replica-%d", i),
		})
		if err != nil {
			t.Fatal(err)
		}
		b.Register("test", plat)
		bots, dbs = append(bots, b), append(dbs, db)
	}
	const cards = 4
	for i := range cards {
		m.Push(calls(tc(fmt.Sprintf("c%d", i), "deploy", `{}`)))
		if err := bots[0].HandleTurn(ctx, bot.Turn{Platform: "test", Channel: "C1", Thread: fmt.Sprintf("T%d", i), User: "bob", Text: "deploy"}); err != nil {
			t.Fatal(err)
		}
	}
	for range cards {
		m.Push(text("done"))
	}
	ids, err := dbs[0].BatchesIn(ctx, confirm.BatchPending)
	if err != nil || len(ids) != cards {
		t.Fatalf("pending batches %v, %v", ids, err)
	}
	var jobs []func(context.Context) error
	for _, b := range bots {
		for _, j := range b.Jobs(time.Second) {
			if j.Name == bot.JobCardSync {
				jobs = append(jobs, j.Run)
			}
		}
	}
	var wg sync.WaitGroup
	for i, b := range bots {
		for _, id := range ids {
			wg.Go(func() {
				for range 10 {
					b.RefreshCard(ctx, id)
				}
			})
		}
		wg.Go(func() {
			for range 20 {
				if err := jobs[i](ctx); err != nil {
					t.Error(err)
				}
			}
		})
	}
	// Decisions land meanwhile, on either replica.
	for i, id := range ids {
		wg.Go(func() {
			b, err := dbs[0].Batch(ctx, id)
			if err != nil {
				t.Error(err)
				return
			}
			ref := confirm.RefAt(id, 0, b.Calls[0].Revision)
			if err := bots[i%2].Decide(ctx, bot.Click{Platform: "test", Channel: "C1", User: "alice", Ref: ref, Message: "card-" + id, Allow: true}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for _, j := range jobs {
		if err := j(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := dbs[1].CardsBehind(ctx); err != nil || n != 0 {
		t.Fatalf("%d messages behind, %v", n, err)
	}
	plat.mu.Lock()
	defer plat.mu.Unlock()
	for _, id := range ids {
		c, ok := plat.last["card-"+id]
		if !ok || !c.Complete() || c.Calls[0].Run != confirm.RunSucceeded || c.Calls[0].State.By != "alice" {
			t.Errorf("card %s ends as %+v", id, c.Calls)
		}
	}
	if plat.peak.Most() < 2 {
		t.Logf("updates never overlapped across messages (peak %d): the test raced less than it could", plat.peak.Most())
	}
	t.Logf("%d updates for %d cards, %d changes each asked by both replicas", plat.sends, cards, 20)
}
