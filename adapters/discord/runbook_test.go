package discord

import (
	"context"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/runbook"
)

// sampleRun is a run message in a status, its parameters hostile.
func sampleRun(st confirm.RunbookStatus) card.Run {
	r := card.Run{ID: "r7k2mq9xabcdefghijklmnopqr", Runbook: "restart", RequestedBy: requester, Status: st,
		Params: "{\"reason\":\"@everyone <@" + spammer + "> ```x``` **now**\",\"service\":\"api\"}",
		Steps: []card.RunStep{
			{ID: "before", Tool: "service_status", State: "succeeded (15ms)"},
			{ID: "restart", Tool: "restart_service", State: "needs approval, or running once allowed"},
		}}
	if st == confirm.RunbookHalted {
		r.Steps[1].State, r.HaltedAt = "unknown", "restart"
	}
	return r
}

// The run message: its text in a code block (inert: no backtick run can
// close it), and its buttons by status, each carrying the run's reference
// only.
func TestRenderRunGolden(t *testing.T) {
	for _, st := range []confirm.RunbookStatus{confirm.RunbookRunning, confirm.RunbookHalted, confirm.RunbookSucceeded} {
		m := RenderRun(sampleRun(st))
		if strings.Count(m.Content, "```") != 2 {
			t.Fatalf("%s: the code block can be closed early: %q", st, m.Content)
		}
		golden(t, "run_"+string(st)+".json", m)
	}
}

// rbBooks is one runbook whose only step is gated (restart_service asks).
func rbBooks(t *testing.T) []*runbook.Runbook {
	t.Helper()
	rbs, err := runbook.Compile("runbooks", []runbook.Config{{
		Name:  "restart",
		Steps: []runbook.StepConfig{{ID: "restart", Tool: "restart_service", Args: map[string]any{"service": "{{ params.service }}"}}},
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return rbs
}

// Stop run on Discord: the requester's click stops the run (the waiting
// step denied, nothing runs) and the edited message loses its buttons; a
// stranger's click, a forged reference and the run's button on another
// message change nothing and are answered ephemerally; a second click is
// harmless.
func TestRunStopButton(t *testing.T) {
	h := newHarnessWith(t, defaultChannels(), func(c *bot.Config) { c.Runbooks = rbBooks(t) })
	h.start()
	h.fd.Send("MESSAGE_CREATE", guildMessage("7101", channelID, requester, mentionText("run restart service=api"), true))
	thread := h.threadFor("7101")
	runMsg := h.nthPosted(thread, 1, "Runbook restart", "no run message")
	stepCard := h.card(thread, 2)
	byAction := map[string]string{}
	for _, row := range runMsg.components {
		for _, c := range row["components"].([]any) {
			id := c.(map[string]any)["custom_id"].(string)
			action, _, _ := parseCustomID(id)
			byAction[action] = id
		}
	}
	stop := byAction[actionRunStop]
	if len(byAction) != 1 || stop == "" {
		t.Fatalf("buttons of a running run: %v", byAction)
	}
	_, ref, _ := parseCustomID(stop)
	runID, err := confirm.ParseRunRef(ref)
	if err != nil {
		t.Fatal(err)
	}
	status := func() confirm.RunbookStatus {
		r, err := h.db.RunbookRun(context.Background(), runID)
		if err != nil {
			t.Fatal(err)
		}
		h.bot.Runbooks().Wait()
		return r.Status
	}
	// The run message says the step waits (its one edit so far).
	edits := len(h.fd.WaitFor("PATCH", "/channels/"+thread+"/messages/"+runMsg.id, 1))
	if !strings.Contains(h.lastEdit(thread, runMsg.id).content, "needs approval") {
		t.Fatalf("run message: %q", h.lastEdit(thread, runMsg.id).content)
	}
	hostile := []struct {
		id, user, customID, message, want string
	}{
		{"8101", outsider, stop, runMsg.id, bot.UserMessage(bot.ErrNotAllowedToStop)},
		{"8102", moderator, customID(actionRunStop, confirm.RunRef("zzzzzzzzzzzzzzzzzzzzzzzzzz")), runMsg.id, bot.UserMessage(confirm.ErrBadRef)},
		{"8103", moderator, stop, stepCard.id, bot.UserMessage(confirm.ErrBadRef)}, // the run's button on the step's card
	}
	for _, c := range hostile {
		roles := []string{otherRole}
		if c.user == moderator {
			roles = append(roles, modRole)
		}
		h.fd.Send("INTERACTION_CREATE", click(c.id, thread, c.user, roles, c.customID, c.message))
		fu := h.fd.WaitFor("POST", "/webhooks/"+botID+"/token-"+c.id, 1)[0].JSON(t)
		if fu["content"] != c.want {
			t.Fatalf("%s: follow-up %v, want %q", c.id, fu["content"], c.want)
		}
		if st := status(); st != confirm.RunbookRunning {
			t.Fatalf("%s changed the run: %s", c.id, st)
		}
	}
	if n := len(h.fd.Recorded("PATCH", "/channels/"+thread+"/messages/"+runMsg.id)); n != edits {
		t.Fatalf("the run message was edited %d times by refused clicks", n-edits)
	}
	h.fd.Send("INTERACTION_CREATE", click("8104", thread, requester, nil, stop, runMsg.id))
	all := h.fd.WaitFor("PATCH", "/channels/"+thread+"/messages/"+runMsg.id, edits+1)
	edited := decodeMessage(t, all[len(all)-1])
	if !strings.Contains(edited.content, "stopped") || len(edited.components) != 0 {
		t.Fatalf("the stopped run's message: %+v", edited)
	}
	if st := status(); st != confirm.RunbookStopped || h.tool.runs.Load() != 0 {
		t.Fatalf("after Stop run: %s, the step ran %d times", st, h.tool.runs.Load())
	}
	if fus := h.fd.Recorded("POST", "/webhooks/"+botID+"/token-8104"); len(fus) != 0 {
		t.Fatalf("the stop got a follow-up: %s", fus[0].Body)
	}
	h.fd.Send("INTERACTION_CREATE", click("8105", thread, requester, nil, stop, runMsg.id))
	fu := h.fd.WaitFor("POST", "/webhooks/"+botID+"/token-8105", 1)[0].JSON(t)
	if !strings.Contains(fu["content"].(string), "already ended") || h.tool.runs.Load() != 0 {
		t.Fatalf("second click: %v", fu)
	}
}

// With the web console, the run message ends with the link to the run's
// page, after its code block, and a long run still fits one message.
func TestRenderRunLinksToThePage(t *testing.T) {
	r := sampleRun(confirm.RunbookRunning)
	r.PageURL = "https://airlock.example.com/ui/runs/" + r.ID
	m := RenderRun(r)
	if !strings.HasSuffix(m.Content, "```\n["+card.PageLinkWords+"](<"+r.PageURL+">)") {
		t.Fatalf("the run message: %q", m.Content)
	}
	r.Params = strings.Repeat("x", 5000)
	if m := RenderRun(r); len([]rune(m.Content)) > maxContent || !strings.Contains(m.Content, r.PageURL) {
		t.Fatalf("a long run's message: %d characters, link kept: %v", len([]rune(m.Content)), strings.Contains(m.Content, r.PageURL))
	}
}

// Only the console's pages and Discord's jump URLs go in a link: a URL of
// another shape, or one that could close the markdown, is dropped.
func TestSafeLinkTakesConsolePages(t *testing.T) {
	for u, ok := range map[string]bool{
		"https://airlock.example.com/ui/approvals/3u6ppomm5zvh22m33cscq5chua": true,
		"https://airlock.example.com/ui/runs/r7k2":                            true,
		"http://localhost:8080/airlock/ui/runs/r7k2":                          true,
		JumpBase + "1100000000000000001/1100000000000000002":                  true,
		"https://airlock.example.com/ui/approvals/x?next=https://evil":        false,
		"https://airlock.example.com/ui/approvals/x#frag":                     false,
		"https://user@airlock.example.com/ui/approvals/x":                     false,
		"https://airlock.example.com/ui/audit":                                false,
		"https://airlock.example.com/ui/approvals/x>)[y](<https://evil":       false,
		"javascript:alert(1)//ui/approvals/x":                                 false,
		"https://evil.example/login":                                          false,
	} {
		if got := safeLink(u) != ""; got != ok {
			t.Errorf("safeLink(%q) kept %v, want %v", u, got, ok)
		}
	}
}

// With the web console, a card's footer links to its page.
func TestCardLinksToItsPage(t *testing.T) {
	c := sampleCard()
	c.PageURL = "https://airlock.example.com/ui/approvals/" + c.BatchID
	content, _, _ := Render(c)
	if !strings.Contains(content, "["+card.PageLinkWords+"](<"+c.PageURL+">)") {
		t.Fatalf("the card's content: %q", content)
	}
}
