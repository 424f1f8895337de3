package bot_test

import (
	"context"
	"testing"
	"time"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/jobs"
)

// TestJobs: the bot's background work keeps its schedule as named jobs
// (sweep and escalate every interval, answers at start and every
// interval, inbox every five, recover every ten, prune-events at start
// and every 3,600), each with a deadline; the sweep job leaves
// escalation to the escalate job, which escalates once, as Sweep does.
func TestJobs(t *testing.T) {
	step := bot.EscalationStep{After: 5 * time.Minute, Mention: confirm.Approvers{Users: []string{"lead"}}}
	h, r := routed(t, bot.Channel{Approvers: []string{"alice"}}, func(c *bot.Config) {
		c.Escalation = []bot.EscalationStep{step}
	})
	byName := map[string]jobs.Job{}
	for _, j := range h.bot.Jobs(2 * time.Second) {
		byName[j.Name] = j
	}
	for _, want := range []struct {
		name    string
		every   time.Duration
		atStart bool
	}{
		{bot.JobSweep, 2 * time.Second, false},
		{bot.JobEscalate, 2 * time.Second, false},
		{bot.JobRecover, 20 * time.Second, false},
		{bot.JobPruneEvents, 2 * time.Hour, true},
		{bot.JobRunbooks, 2 * time.Second, true},
		{bot.JobCardSync, 2 * time.Second, true},
		{bot.JobInbox, 10 * time.Second, true},
		{bot.JobAnswers, 2 * time.Second, true},
		{bot.JobQuestions, 20 * time.Second, false},
	} {
		j, ok := byName[want.name]
		if !ok || j.Every != want.every || j.AtStart != want.atStart || j.Timeout <= 0 || j.Run == nil {
			t.Errorf("job %s: %+v, want every %v, at start %v, a timeout", want.name, j, want.every, want.atStart)
		}
		if err := jobs.New(jobs.Options{}).Add(j); err != nil {
			t.Errorf("job %s refused: %v", want.name, err)
		}
	}
	if j := byName[bot.JobCardSync]; j.Wake == nil {
		t.Error("the card-sync job has no wake-up")
	}
	if len(byName) != 9 {
		t.Errorf("jobs %v", byName)
	}

	h.push(calls(tc("a", "deploy", `{}`)), text("done"))
	h.turn("bob", "deploy")
	h.now.Add(int64(6 * time.Minute))
	ctx := context.Background()
	if err := byName[bot.JobSweep].Run(ctx); err != nil {
		t.Fatal(err)
	}
	if n := escalationPosts(r); n != 0 {
		t.Fatalf("the sweep job escalated (%d posts): escalation is its own job", n)
	}
	for range 2 {
		if err := byName[bot.JobEscalate].Run(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := escalationPosts(r); n != 1 {
		t.Fatalf("%d escalation posts from the escalate job, want 1", n)
	}
	if err := byName[bot.JobPruneEvents].Run(ctx); err != nil {
		t.Fatal(err)
	}
}
