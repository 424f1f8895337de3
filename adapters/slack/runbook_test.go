package slack

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/airlockhq/airlock/bot"
	cardpkg "github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/runbook"
)

// The run message's text is plain text: parameters and results on it
// cannot mention, link or format; the fallback is escaped like any post;
// a long message is cut to fit one section.
func TestRunBlocksInert(t *testing.T) {
	r := cardpkg.Run{ID: "r1", Runbook: "restart", RequestedBy: bob, Status: confirm.RunbookSucceeded,
		Params: `{"service":"<!channel> <https://evil|x> *hi*"}`}
	blocks, fallback := RenderRun(r)
	if len(blocks) != 1 {
		t.Fatalf("an ended run has buttons: %+v", blocks)
	}
	sec, ok := blocks[0].(*slack.SectionBlock)
	if !ok || sec.Text.Type != slack.PlainTextType {
		t.Fatalf("not a plain text section: %+v", blocks[0])
	}
	if strings.Contains(fallback, "<!channel>") || strings.Contains(fallback, "<https://") {
		t.Fatalf("fallback not escaped: %q", fallback)
	}
	r.Params = strings.Repeat("x", 5000)
	long, _ := RenderRun(r)
	if n := len([]rune(long[0].(*slack.SectionBlock).Text.Text)); n > 3000 {
		t.Fatalf("section text of %d characters", n)
	}
}

// runBooks are the world's runbooks: a read-only step, then a gated one.
func runBooks(t *testing.T) []*runbook.Runbook {
	t.Helper()
	rbs, err := runbook.Compile("runbooks", []runbook.Config{{
		Name: "restart",
		Parameters: map[string]any{"type": "object", "properties": map[string]any{"service": map[string]any{"type": "string"}},
			"required": []any{"service"}},
		Steps: []runbook.StepConfig{
			{ID: "before", Tool: "service_status", Args: map[string]any{"service": "{{ params.service }}"}},
			{ID: "deploy", Tool: "deploy", Args: map[string]any{"service": "{{ params.service }}"}},
			{ID: "after", Tool: "service_status", Args: map[string]any{"service": "{{ params.service }}"}},
		},
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return rbs
}

func isRunMessage(c apiCall) bool { return strings.Contains(c.param("blocks"), `"block_id":"run"`) }

// runMessage waits for the run message's post, and returns it.
func (w *world) runMessage() apiCall {
	w.t.Helper()
	var found apiCall
	waitFor(w.t, "the run message", func() bool {
		for _, c := range w.fake.callsTo("chat.postMessage") {
			if isRunMessage(c) {
				found = c
				return true
			}
		}
		return false
	})
	return found
}

// runUpdates are the chat.update calls of run messages, in order.
func (w *world) runUpdates() []apiCall {
	var out []apiCall
	for _, c := range w.fake.callsTo("chat.update") {
		if isRunMessage(c) {
			out = append(out, c)
		}
	}
	return out
}

// runButton is the value of the run message's button with actionID.
func runButton(t *testing.T, c apiCall, actionID string) string {
	t.Helper()
	for _, b := range cardButtons(t, c) {
		if b.ActionID == actionID {
			return b.Value
		}
	}
	t.Fatalf("no %s button on the run message: %s", actionID, c.param("blocks"))
	return ""
}

func (w *world) startRun() (runMsg, card apiCall, runID string) {
	w.t.Helper()
	w.deliverEvent(mention(w.eventID(), chanOps, bob, mentionTS, "", "<@"+botUser+"> run restart service=api"), 0)
	card = w.waitCard(1)
	runMsg = w.runMessage()
	w.ad.Wait()
	w.bot.Runbooks().Wait()
	live, err := w.db.LiveRunbookRuns(context.Background())
	if err != nil || len(live) != 1 {
		w.t.Fatalf("runs: %v %v", live, err)
	}
	return runMsg, card, live[0].ID
}

func (w *world) runStatus(id string) confirm.RunbookStatus {
	w.t.Helper()
	r, err := w.db.RunbookRun(context.Background(), id)
	if err != nil {
		w.t.Fatal(err)
	}
	return r.Status
}

// Stop run on the run message: it carries the run's reference only; a
// click by someone who neither started the run nor approves, an unknown
// reference, and the run's reference on another message change nothing
// and are answered only to the clicker; the requester's click stops the
// run (the waiting step denied, nothing more runs) and the message loses
// its buttons; a second click is harmless.
func TestRunStopButton(t *testing.T) {
	w := newWorldWith(t, ModeHTTP, func(c *bot.Config) { c.Runbooks = runBooks(t) })
	runMsg, card, id := w.startRun()
	ref := runButton(t, runMsg, ActionRunStop)
	if ref != confirm.RunRef(id) || strings.Contains(runMsg.param("blocks"), ActionRunMarkDone) {
		t.Fatalf("buttons of a running run: %s", runMsg.param("blocks"))
	}
	updates := len(w.runUpdates())
	hostile := []struct {
		who, want string
		click     map[string]any
	}{
		{mallory, "Only the person who started this run or an approver", clickOn(runMsg, mallory, ActionRunStop, ref)},
		{alice, "not one I know", clickOn(runMsg, alice, ActionRunStop, confirm.RunRef("zzzzzzzzzzzzzzzzzzzzzzzzzz"))},
		{carol, "not one I know", clickOn(card, carol, ActionRunStop, ref)}, // the run's reference on the step's card
	}
	for _, h := range hostile {
		w.deliverInteraction(h.click)
		w.waitEphemeral(h.who, h.want)
		w.ad.Wait()
		w.bot.Runbooks().Wait()
		if st := w.runStatus(id); st != confirm.RunbookRunning || len(w.runUpdates()) != updates || len(w.fake.callsTo("chat.update")) != updates {
			t.Fatalf("%s's click changed something: run %s, %d updates", h.who, st, len(w.fake.callsTo("chat.update")))
		}
	}
	rejected := map[string]bool{}
	for _, e := range w.audit(confirm.AuditRejectedClick) {
		if strings.Contains(e.Detail, confirm.RunRef(id)) {
			rejected[e.Actor] = true
		}
	}
	if !rejected[mallory] || !rejected[carol] {
		t.Fatalf("refused run clicks not audited: %v", rejected)
	}
	// A malformed reference is no interaction of Airlock's at all.
	raw, _ := json.Marshal(clickOn(runMsg, alice, ActionRunStop, "run-../x"))
	body := []byte(url.Values{"payload": {string(raw)}}.Encode())
	if code, _ := w.post(body, http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, true, time.Now()); code != http.StatusBadRequest {
		t.Fatalf("a malformed run reference: HTTP %d", code)
	}
	w.ad.Wait()
	if st := w.runStatus(id); st != confirm.RunbookRunning {
		t.Fatalf("a malformed reference stopped the run: %s", st)
	}

	w.deliverInteraction(clickOn(runMsg, bob, ActionRunStop, ref))
	w.ad.Wait()
	w.bot.Runbooks().Wait()
	if st := w.runStatus(id); st != confirm.RunbookStopped {
		t.Fatalf("after Stop run: %s", st)
	}
	if n := w.tools["deploy"].runs.Load(); n != 0 {
		t.Fatalf("the stopped run's step ran %d times", n)
	}
	ups := w.runUpdates()
	if len(ups) == 0 {
		t.Fatal("the run message was not updated")
	}
	last := ups[len(ups)-1]
	if !strings.Contains(last.param("blocks"), "stopped") || len(cardButtons(t, last)) != 0 {
		t.Fatalf("the stopped run's message: %s", last.param("blocks"))
	}
	w.deliverInteraction(clickOn(runMsg, bob, ActionRunStop, ref))
	w.waitEphemeral(bob, "already ended")
	w.ad.Wait()
	if st := w.runStatus(id); st != confirm.RunbookStopped || w.tools["deploy"].runs.Load() != 0 {
		t.Fatalf("a second click changed something: %s", st)
	}
}

// A halted run (an unknown outcome) offers Mark done, Retry and Stop;
// only an approver may mark the step done or retry it (the requester and
// a stranger are refused, nothing changes); Mark done goes on, and a
// second click is harmless.
func TestRunHaltedButtons(t *testing.T) {
	w := newWorldWith(t, ModeHTTP, func(c *bot.Config) { c.Runbooks = runBooks(t) })
	w.tools["deploy"].unknownRuns = 1
	runMsg, card, id := w.startRun()
	w.deliverInteraction(clickOn(card, alice, ActionAllow, refByStyle(t, card, "primary")))
	w.ad.Wait()
	w.bot.Runbooks().Wait()
	if st := w.runStatus(id); st != confirm.RunbookHalted {
		t.Fatalf("after the unknown outcome: %s", st)
	}
	ups := w.runUpdates()
	halted := ups[len(ups)-1]
	var ids []string
	for _, b := range cardButtons(t, halted) {
		ids = append(ids, b.ActionID)
		if b.Value != confirm.RunRef(id) {
			t.Fatalf("a run button carries %q", b.Value)
		}
	}
	if strings.Join(ids, " ") != ActionRunMarkDone+" "+ActionRunRetry+" "+ActionRunStop {
		t.Fatalf("buttons of the halted run: %v", ids)
	}
	ref := confirm.RunRef(id)
	for _, who := range []string{bob, mallory} {
		for _, act := range []string{ActionRunMarkDone, ActionRunRetry} {
			w.deliverInteraction(clickOn(runMsg, who, act, ref))
			w.waitEphemeral(who, "only an approver can mark a step done or retry it")
		}
	}
	w.ad.Wait()
	w.bot.Runbooks().Wait()
	if st := w.runStatus(id); st != confirm.RunbookHalted || w.tools["deploy"].runs.Load() != 1 || w.tools["service_status"].runs.Load() != 1 {
		t.Fatalf("a refused click changed something: %s", st)
	}
	w.deliverInteraction(clickOn(runMsg, alice, ActionRunMarkDone, ref))
	w.ad.Wait()
	w.bot.Runbooks().Wait()
	if st := w.runStatus(id); st != confirm.RunbookSucceeded || w.tools["service_status"].runs.Load() != 2 || w.tools["deploy"].runs.Load() != 1 {
		t.Fatalf("after Mark done: %s, service_status ran %d", st, w.tools["service_status"].runs.Load())
	}
	w.deliverInteraction(clickOn(runMsg, carol, ActionRunRetry, ref))
	w.waitEphemeral(carol, "already ended")
	w.ad.Wait()
	if st := w.runStatus(id); st != confirm.RunbookSucceeded || w.tools["deploy"].runs.Load() != 1 {
		t.Fatalf("a click on the ended run changed something: %s", st)
	}
}

// With the web console, the run message ends with the link to the run's
// page; without it, no link.
func TestRunBlocksLinkToThePage(t *testing.T) {
	r := cardpkg.Run{ID: "r1", Runbook: "restart", RequestedBy: bob, Status: confirm.RunbookRunning}
	blocks, _ := RenderRun(r)
	for _, b := range blocks {
		if b.ID() == "run_footer" {
			t.Fatalf("a link without the console: %+v", b)
		}
	}
	r.PageURL = "https://airlock.example.com/ui/runs/r1"
	blocks, _ = RenderRun(r)
	last, ok := blocks[len(blocks)-1].(*slack.ContextBlock)
	if !ok || last.BlockID != "run_footer" {
		t.Fatalf("the last block: %+v", blocks[len(blocks)-1])
	}
	if txt := last.ContextElements.Elements[0].(*slack.TextBlockObject).Text; txt != "<https://airlock.example.com/ui/runs/r1|"+cardpkg.PageLinkWords+">" {
		t.Fatalf("the link: %q", txt)
	}
}
