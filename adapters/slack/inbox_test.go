package slack

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/adapters/internal/sealed"
	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/confirm"
)

// runInbox runs the bot's inbox job once.
func (w *world) runInbox() {
	w.t.Helper()
	for _, j := range w.bot.Jobs(time.Second) {
		if j.Name == bot.JobInbox {
			if err := j.Run(context.Background()); err != nil {
				w.t.Fatal(err)
			}
			w.ad.Wait()
			return
		}
	}
	w.t.Fatal("no inbox job")
}

// leftBehind records a delivery as a process that then died did: its
// claim lapsed at once.
func (w *world) leftBehind(kind, key string, payload []byte) {
	w.t.Helper()
	w.recordRaw(w.ad.seal.Seal(confirm.InboxItem{Platform: Platform, Key: key, Kind: kind, Payload: payload}))
}

// recordRaw writes an inbox record as it is, claimed by a dead process.
func (w *world) recordRaw(it confirm.InboxItem) {
	w.t.Helper()
	if _, err := w.db.RecordInbox(context.Background(), it, "dead", time.Nanosecond); err != nil {
		w.t.Fatal(err)
	}
}

// Someone with write access to the database only inserts a click of an
// approver into the inbox, unsealed, sealed with another token, or a
// sealed click of a stranger edited into the approver's: the inbox job
// works none of them. The call still waits, the tool never runs, and the
// log names each record refused.
func TestForgedInboxRecordsRefused(t *testing.T) {
	w := newWorld(t, ModeHTTP)
	w.scriptDeploy("Deployed api.")
	card := w.askDeploy()
	w.ad.Wait()
	ref := refByStyle(t, card, "primary")
	click := func(user string) []byte {
		c := blockAction(user, chanOps, mentionTS, ActionAllow, ref)
		w.resolveMessage(c)
		raw, _ := json.Marshal(c)
		return raw
	}
	forged := []confirm.InboxItem{
		{Platform: Platform, Key: "interaction:forged-1", Kind: deliveryInteraction, Payload: click(alice)},
		sealed.New(Platform, "xoxb-another-token").Seal(confirm.InboxItem{Platform: Platform, Key: "interaction:forged-2", Kind: deliveryInteraction, Payload: click(alice)}),
	}
	edited := w.ad.seal.Seal(confirm.InboxItem{Platform: Platform, Key: "interaction:forged-3", Kind: deliveryInteraction, Payload: click(mallory)})
	edited.Payload = bytes.ReplaceAll(edited.Payload, []byte(mallory), []byte(alice))
	for _, it := range append(forged, edited) {
		w.recordRaw(it)
	}
	w.runInbox()
	w.ad.Wait()
	if n := w.tools["deploy"].runs.Load(); n != 0 {
		t.Fatalf("a forged click ran the tool %d times", n)
	}
	r := mustRef(t, ref)
	b, err := w.db.Batch(context.Background(), r.Batch)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range b.Calls {
		if c.Position == r.Position && c.Decision != confirm.DecisionPending {
			t.Fatalf("the call is %s after forged clicks; want it still waiting", c.Decision)
		}
	}
	for _, key := range []string{"forged-1", "forged-2", "forged-3"} {
		if !strings.Contains(w.logs.String(), key) || !strings.Contains(w.logs.String(), "seal does not verify") {
			t.Errorf("the log does not name the refused record %s:\n%s", key, w.logs.String())
		}
	}
}

// mustRef parses a button's call reference.
func mustRef(t *testing.T, value string) confirm.CallRef {
	t.Helper()
	r, err := confirm.ParseCallRef(value)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// What a process killed after acknowledging a delivery left in the
// inbox is worked by the next one's inbox job, through the same path: the
// mention gets its card, the click decides it; Slack's retry of the
// recorded event starts nothing more; a click counted before the kill,
// worked again, changes nothing and tells the clicker nothing; nothing is
// left over.
func TestReplayedDeliveries(t *testing.T) {
	w := newWorld(t, ModeHTTP)
	w.scriptDeploy("Deployed api.")
	ev := mention(w.eventID(), chanOps, bob, mentionTS, "", "<@"+botUser+"> deploy api")
	body, _ := json.Marshal(ev)
	w.leftBehind(deliveryEvent, eventKey(ev["event_id"].(string)), body)
	w.runInbox()
	card := w.waitCard(1)
	w.deliverEvent(ev, 1) // Slack's retry, had the ack been late
	w.ad.Wait()
	if n := len(w.model.Requests()); n != 1 || len(w.cards()) != 1 {
		t.Fatalf("the mention was worked %d times, %d cards", n, len(w.cards()))
	}

	click := blockAction(alice, chanOps, mentionTS, ActionAllow, refByStyle(t, card, "primary"))
	w.resolveMessage(click)
	raw, _ := json.Marshal(click)
	w.leftBehind(deliveryInteraction, "interaction:dead-1", raw)
	w.runInbox()
	w.waitText(chanOps, "Deployed api.")
	// The same click, counted, worked again (its receiver died after the
	// decision, before marking it done).
	w.leftBehind(deliveryInteraction, "interaction:dead-2", raw)
	w.runInbox()
	if d := w.tools["deploy"].runs.Load(); d != 1 {
		t.Fatalf("deploy ran %d times", d)
	}
	if e := w.ephemerals(alice); len(e) != 0 {
		t.Fatalf("the clicker was told %q", e[0].param("text"))
	}
	// Every delivery was marked done: none is claimed, even with every
	// claim cleared.
	if err := w.db.ClearLeases(context.Background()); err != nil {
		t.Fatal(err)
	}
	if left, err := w.db.ClaimInbox(context.Background(), "another", []string{Platform}, time.Minute, 10); err != nil || len(left) != 0 {
		t.Fatalf("left in the inbox: %+v %v", left, err)
	}
}

// A delivery that could not be recorded (the database away) is not
// acknowledged as taken: a click gets 503 (Socket Mode: no ack), so
// Slack shows it failed, and its clicker is told why; an event gets 503
// (no ack) until Slack's last try, which is acknowledged with a word in
// its thread.
func TestNotRecordedIsNotAcknowledged(t *testing.T) {
	for _, mode := range []string{ModeHTTP, ModeSocket} {
		t.Run(mode, func(t *testing.T) {
			w := newWorld(t, mode)
			w.scriptDeploy("Deployed.")
			card := w.askDeploy()
			w.ad.Wait()
			ref := refByStyle(t, card, "primary")
			w.db.Close() // the database away

			click := blockAction(alice, chanOps, mentionTS, ActionAllow, ref)
			w.resolveMessage(click)
			if mode == ModeHTTP {
				raw, _ := json.Marshal(click)
				body := []byte(url.Values{"payload": {string(raw)}}.Encode())
				if code, _ := w.post(body, http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, true, time.Now()); code != http.StatusServiceUnavailable {
					t.Fatalf("a click not recorded was answered %d; want 503", code)
				}
				w.waitEphemeral(alice, "couldn't record")
			} else {
				id := w.fake.sendEnvelope("interactive", click, 0)
				w.waitEphemeral(alice, "couldn't record") // told once it was not recorded: never acked
				if w.fake.acked(id) {
					t.Fatal("a click not recorded was acked")
				}
			}

			ev := mention(w.eventID(), chanOps, bob, "1700000002.000100", "", "<@"+botUser+"> hello")
			for retry := 0; retry <= lastRetry; retry++ {
				acked := false
				if mode == ModeHTTP {
					body, _ := json.Marshal(ev)
					h := http.Header{"Content-Type": {"application/json"}}
					if retry > 0 {
						h.Set(headerRetryNum, strconv.Itoa(retry))
					}
					code, _ := w.post(body, h, true, time.Now())
					acked = code == http.StatusOK
				} else {
					id := w.fake.sendEnvelope("events_api", ev, retry)
					waitFor(t, "the envelope worked", func() bool {
						if retry == lastRetry {
							return w.fake.acked(id)
						}
						return strings.Count(w.logs.String(), "event not recorded") > retry // logged, then not acked
					})
					acked = w.fake.acked(id)
				}
				if acked != (retry == lastRetry) {
					t.Fatalf("try %d of an event not recorded: acked %v", retry+1, acked)
				}
			}
			told := w.waitText(chanOps, "can't reach my database")
			if told.param("thread_ts") != "1700000002.000100" {
				t.Fatalf("told in thread %q", told.param("thread_ts"))
			}
			if strings.Contains(w.logs.String(), "slack: turn ") {
				t.Fatal("a turn started for an event not recorded")
			}
		})
	}
}
