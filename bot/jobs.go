package bot

import (
	"context"
	"time"

	"github.com/airlockhq/airlock/jobs"
)

// Names of the bot's jobs (the job label of airlock_job_seconds).
const (
	JobSweep       = "sweep"
	JobEscalate    = "escalate"
	JobRecover     = "recover"
	JobPruneEvents = "prune-events"
	// JobCardSync (cardsync.go): card messages behind their batch.
	// JobInbox (inbox.go): deliveries their receiver did not finish.
	// JobAnswers (answers.go): answers stored and not posted.
)

// Deadlines of the bot's jobs. A sweep or a recovery continues the
// conversations it finishes (model requests of up to 5 minutes each, tool
// runs): its deadline is a backstop for a hung run, not a budget. An
// escalation may wait for a sweep (they take turns), so it has as long.
const (
	sweepTimeout    = time.Hour
	escalateTimeout = sweepTimeout
	recoverTimeout  = time.Hour
	pruneTimeout    = 5 * time.Minute
)

// eventRetention is how long platform event IDs are kept to drop
// redeliveries: platforms retry within minutes; a day is plenty.
const eventRetention = 24 * time.Hour

// Jobs is the bot's background work, for a jobs.Runner: every interval,
// expiry and reminders (sweep) and escalation, which take turns, and card
// messages behind their batch (card-sync, also woken by every change of a
// card that could not be rendered at once); at start and every five
// intervals, this process's inbox claims renewed and the deliveries dead
// processes left worked off (inbox); at start and every interval, the
// answers stored and left unposted posted (answers); with a gateway
// client's callbacks, at start and every interval, the callbacks of
// decided approvals queued (gateway-callbacks); every ten
// intervals, work dead workers left (recover); at start and every 3,600
// intervals, old platform event IDs and inbox deliveries (prune-events).
func (b *Bot) Jobs(interval time.Duration) []jobs.Job {
	if interval <= 0 {
		interval = time.Second
	}
	all := []jobs.Job{
		{Name: JobSweep, Every: interval, Timeout: sweepTimeout, Run: func(ctx context.Context) error { return b.sweep(ctx, false) }},
		{Name: JobEscalate, Every: interval, Timeout: escalateTimeout, Run: b.escalateJob},
		{Name: JobRecover, Every: 10 * interval, Timeout: recoverTimeout, Run: b.RecoverBatches},
		{Name: JobRunbooks, Every: interval, Timeout: recoverTimeout, AtStart: true, Run: b.runbookJob},
		{Name: JobCardSync, Every: interval, Timeout: cardSyncTimeout, AtStart: true, Wake: b.cs.wake, Run: b.cardSyncJob},
		{Name: JobInbox, Every: inboxEvery * interval, Timeout: pruneTimeout, AtStart: true, Run: b.inboxJob},
		{Name: JobAnswers, Every: interval, Timeout: answersTimeout, AtStart: true, Run: b.answersJob},
		{Name: JobQuestions, Every: 10 * interval, Timeout: pruneTimeout, Run: b.questionJob},
		{Name: JobPruneEvents, Every: 3600 * interval, Timeout: pruneTimeout, AtStart: true, Run: b.pruneEvents},
	}
	for _, c := range b.cfg.Gateway.Clients {
		if c.CallbackSecret != "" {
			return append(all, jobs.Job{Name: JobCallbacks, Every: interval, Timeout: pruneTimeout, AtStart: true, Run: b.callbacksJob})
		}
	}
	return all
}

// Run runs the bot's jobs (see Jobs) until ctx ends, then waits for the
// runs in progress.
func (b *Bot) Run(ctx context.Context, interval time.Duration) {
	r := jobs.New(jobs.Options{Logger: b.log})
	for _, j := range b.Jobs(interval) {
		if err := r.Add(j); err != nil {
			panic(err) // the jobs above are valid
		}
	}
	_ = r.Run(ctx)
}

// escalateJob escalates the batches due (see Config.Escalation). It
// takes turns with the sweep, so a card's escalation and its expiry are
// never shown out of order.
func (b *Bot) escalateJob(ctx context.Context) error {
	if !b.enter() {
		return nil
	}
	defer b.leave()
	b.sweeping.Lock()
	defer b.sweeping.Unlock()
	return b.escalate(ctx)
}

// pruneEvents forgets platform event IDs older than eventRetention and
// inbox deliveries older than inboxRetention.
func (b *Bot) pruneEvents(ctx context.Context) error {
	_, err := b.store.PruneEvents(ctx, b.now().Add(-eventRetention))
	if _, ierr := b.store.PruneInbox(ctx, b.now().Add(-inboxRetention)); ierr != nil && err == nil {
		err = ierr
	}
	return err
}
