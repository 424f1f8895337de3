package discord

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/confirm"
)

// End to end, over the fake gateway and REST API with the real discordgo
// client, SQLite storage and the real bot: cards routed to an approvals
// channel (with a pointer in the thread) and to approvers' DMs, and an
// approver's edit submitted through the modal.

// posted waits for a message posted in channel whose body satisfies
// match, and returns it.
func (h *harness) posted(channel, what string, match func(postedCard) bool) postedCard {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, c := range h.fd.Recorded("POST", "/channels/"+channel+"/messages") {
			if m := decodeMessage(h.t, c); match(m) {
				return m
			}
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("no %s in %s; posts there: %q", what, channel, h.answers(channel))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// editedTo waits until the newest edit of a message satisfies match.
func (h *harness) editedTo(channel, id, what string, match func(postedCard) bool) postedCard {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var last postedCard
	for {
		if edits := h.fd.Recorded("PATCH", "/channels/"+channel+"/messages/"+id); len(edits) > 0 {
			if last = decodeMessage(h.t, edits[len(edits)-1]); match(last) {
				return last
			}
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("message %s in %s never edited to %s; last edit %q", id, channel, what, last.content)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// checkNothingPings checks every message posted or edited pings nobody.
func (h *harness) checkNothingPings() {
	h.t.Helper()
	for _, c := range h.fd.AllCalls() {
		if (c.Method != "POST" && c.Method != "PATCH") || !strings.HasPrefix(c.Path, "/channels/") || !strings.Contains(c.Path, "/messages") || strings.HasSuffix(c.Path, "/threads") {
			continue
		}
		if content, am := postedMentions(h.t, c); len(am.Parse)+len(am.Users)+len(am.Roles) != 0 {
			h.t.Fatalf("%s %s %q may ping: %+v", c.Method, c.Path, content, am)
		}
	}
}

func statusOf(m postedCard) string {
	if len(m.embeds) == 0 {
		return ""
	}
	return field(m.embeds[0], statusLabel)
}

// TestRouteApprovalsChannel: with approvals_channel, the card is a new
// message in the approvals channel linking back to the thread, and the
// thread gets a pointer without buttons linking to the card. A click on
// the card there by a non-approver, and a click in the thread, change
// nothing; an approver's click there decides; the card and the pointer
// are edited to the outcome; nothing pings.
func TestRouteApprovalsChannel(t *testing.T) {
	h := newHarnessWith(t, []bot.Channel{
		{Platform: Platform, ID: channelID, ApproverRoles: []string{modRole}, ApprovalsChannel: approvalsCh},
	}, nil)
	h.startWith(tc("c1", "restart_service", `{"service":"api"}`), "Restarted api.")

	h.fd.Send("MESSAGE_CREATE", guildMessage("7901", channelID, requester, mentionText("restart api"), true))
	thread := h.threadFor("7901")
	card := h.card(approvalsCh, 1)
	threadLink := JumpBase + guildID + "/" + thread
	if !strings.Contains(card.content, "[View the conversation](<"+threadLink+">)") {
		t.Fatalf("the card does not link to the thread: %q", card.content)
	}
	cardLink := JumpBase + guildID + "/" + approvalsCh + "/" + card.id
	ptr := h.posted(thread, "pointer", func(m postedCard) bool { return strings.HasPrefix(m.content, "⏳ Waiting for approval in") })
	if ptr.content != "⏳ Waiting for approval in <#"+approvalsCh+"> — [View the card](<"+cardLink+">)" || len(ptr.components) != 0 {
		t.Fatalf("pointer %q, %d rows", ptr.content, len(ptr.components))
	}
	if n := h.cards(thread); n != 0 {
		t.Fatalf("%d cards in the thread; the card belongs in the approvals channel", n)
	}
	allow, _, _ := buttonIDs(t, card.components)

	// A non-approver on the card; the card's button sent from the thread
	// (on the pointer): nothing runs, nothing is edited.
	h.fd.Send("INTERACTION_CREATE", click("8901", approvalsCh, outsider, []string{otherRole}, allow[0], card.id))
	if got := h.followUp("8901"); got != bot.UserMessage(bot.ErrNotApprover) {
		t.Fatalf("outsider: %q", got)
	}
	h.fd.Send("INTERACTION_CREATE", click("8902", thread, moderator, []string{modRole}, allow[0], ptr.id))
	if got := h.followUp("8902"); got != bot.UserMessage(bot.ErrWrongChannel) {
		t.Fatalf("click on the pointer: %q", got)
	}
	if h.tool.runs.Load() != 0 || len(h.fd.Recorded("PATCH", "/channels/*")) != 0 {
		t.Fatal("refused clicks changed something")
	}

	// The approver on the card: it runs once, the answer goes to the thread.
	h.fd.Send("INTERACTION_CREATE", click("8903", approvalsCh, moderator, []string{modRole}, allow[0], card.id))
	h.waitAnswer(thread, "Restarted api.")
	h.noFollowUp("8903")
	if n := h.tool.runs.Load(); n != 1 {
		t.Fatalf("runs: %d", n)
	}
	final := h.editedTo(approvalsCh, card.id, "the outcome", func(m postedCard) bool { return strings.Contains(statusOf(m), "succeeded") })
	if len(final.components) != 0 || !strings.Contains(statusOf(final), "allowed by <@"+moderator+">") {
		t.Fatalf("card %q, %d rows", statusOf(final), len(final.components))
	}
	out := h.editedTo(thread, ptr.id, "the outcome", func(m postedCard) bool { return strings.Contains(m.content, "succeeded") })
	if !strings.HasPrefix(out.content, "Approval request in <#"+approvalsCh+"> closed — [View the card](<"+cardLink+">)") ||
		!strings.Contains(out.content, "allowed by <@"+moderator+">") || len(out.components) != 0 {
		t.Fatalf("pointer edited to %q", out.content)
	}
	if answers := h.answers(approvalsCh); len(answers) != 0 {
		t.Fatalf("the approvals channel got more than the card: %q", answers)
	}
	h.checkNothingPings()
}

// TestRouteDMCopies: with notify dm, the card stays in the thread and
// each approver named by user id gets a copy in a DM (roles are not
// expanded). A click on one copy decides; a second click on another copy
// changes nothing; every copy and the card are updated; a click claiming
// a message that is not a card of the batch changes nothing.
func TestRouteDMCopies(t *testing.T) {
	h := newHarnessWith(t, []bot.Channel{
		{Platform: Platform, ID: channelID, Approvers: []string{dmUser, approver2}, ApproverRoles: []string{modRole}, Notify: []string{bot.NotifyDM}},
	}, nil)
	h.startWith(tc("c1", "restart_service", `{"service":"api"}`), "Restarted api.")

	h.fd.Send("MESSAGE_CREATE", guildMessage("7911", channelID, requester, mentionText("restart api"), true))
	thread := h.threadFor("7911")
	main := h.card(thread, 1)
	opened := h.fd.WaitFor("POST", "/users/@me/channels", 2)
	var recipients []string
	for _, o := range opened {
		recipients = append(recipients, o.JSON(t)["recipient_id"].(string))
	}
	slices.Sort(recipients)
	if !slices.Equal(recipients, []string{approver2, dmUser}) {
		t.Fatalf("DMs opened with %v; want the approvers named by id only", recipients)
	}
	dm1, dm2 := h.fd.DMOf(dmUser), h.fd.DMOf(approver2)
	copy1, copy2 := h.card(dm1, 1), h.card(dm2, 1)
	threadLink := JumpBase + guildID + "/" + thread
	for _, c := range []postedCard{copy1, copy2} {
		if !strings.Contains(c.content, "A copy of an approval card, sent to you as an approver.") || !strings.Contains(c.content, "[View the conversation](<"+threadLink+">)") {
			t.Fatalf("copy %q", c.content)
		}
	}
	if strings.Contains(main.content, "View the conversation") {
		t.Fatalf("the card in its own thread links to it: %q", main.content)
	}
	allow1, _, _ := buttonIDs(t, copy1.components)
	allow2, _, _ := buttonIDs(t, copy2.components)

	// A click claiming a message that is no card of the batch.
	h.fd.Send("INTERACTION_CREATE", dmClickIn("8911", dm2, approver2, allow2[0], "9999999"))
	if got := h.followUp("8911"); got != bot.UserMessage(bot.ErrWrongChannel) {
		t.Fatalf("click on another message: %q", got)
	}
	if h.tool.runs.Load() != 0 {
		t.Fatal("a click on another message ran the call")
	}

	// One copy decides.
	h.fd.Send("INTERACTION_CREATE", dmClickIn("8912", dm1, dmUser, allow1[0], copy1.id))
	h.waitAnswer(thread, "Restarted api.")
	h.noFollowUp("8912")
	// Another copy, after: nothing changes.
	h.fd.Send("INTERACTION_CREATE", dmClickIn("8913", dm2, approver2, allow2[0], copy2.id))
	if got := h.followUp("8913"); got != bot.UserMessage(bot.ErrAlreadyClosed) {
		t.Fatalf("second copy: %q", got)
	}
	if n := h.tool.runs.Load(); n != 1 {
		t.Fatalf("runs: %d, want 1", n)
	}
	for _, m := range []struct{ channel, id string }{{thread, main.id}, {dm1, copy1.id}, {dm2, copy2.id}} {
		got := h.editedTo(m.channel, m.id, "the outcome", func(p postedCard) bool { return strings.Contains(statusOf(p), "succeeded") })
		if len(got.components) != 0 || !strings.Contains(statusOf(got), "allowed by <@"+dmUser+">") {
			t.Fatalf("%s/%s: %q, %d rows", m.channel, m.id, statusOf(got), len(got.components))
		}
	}
	if n := len(h.model.Requests()); n != 2 {
		t.Fatalf("model requests: %d, want 2", n)
	}
	h.checkNothingPings()
}

// TestRouteEditViaModal: Edit… opens the modal with the call's arguments;
// a submission that is not valid for the tool is refused to the editor
// alone and changes nothing; a non-approver's and the requester's
// submissions are refused; a valid one runs the call with the edited
// arguments, the card says who edited what, and the model is told.
func TestRouteEditViaModal(t *testing.T) {
	h := newHarness(t)
	h.startWith(tc("c1", "restart_service", `{"service":"api"}`), "Restarted web.")

	thread, card := h.askForCard("7921", "restart api")
	edit := buttonsByAction(t, card.components)[actionEdit]
	if len(edit) != 1 {
		t.Fatalf("edit buttons: %v", edit)
	}
	ref := strings.TrimPrefix(edit[0], "al:"+actionEdit+":")
	submit := "al:" + actionEditSubmit + ":" + ref

	h.fd.Send("INTERACTION_CREATE", click("8921", thread, moderator, []string{modRole}, edit[0], card.id))
	cb := h.callback("8921")
	raw, _ := json.Marshal(cb["data"])
	if cb["type"] != float64(discordgo.InteractionResponseModal) || !strings.Contains(string(raw), `"custom_id":"`+submit+`"`) ||
		!strings.Contains(string(raw), `\"service\": \"api\"`) {
		t.Fatalf("edit callback %v", cb)
	}

	// Not an object for the tool; not JSON: refused, nothing changes.
	for i, bad := range []string{`[1, 2]`, `{"service": "web"`} {
		id := []string{"8922", "8923"}[i]
		h.fd.Send("INTERACTION_CREATE", editSubmit(id, thread, moderator, []string{modRole}, submit, bad, card.id))
		if got := h.followUp(id); !strings.HasPrefix(got, "Edit refused: ") || !strings.HasSuffix(got, "Nothing changed.") {
			t.Fatalf("submission %q answered %q", bad, got)
		}
	}
	// A non-approver, and the requester (self-approval is off).
	h.fd.Send("INTERACTION_CREATE", editSubmit("8924", thread, outsider, []string{otherRole}, submit, `{"service":"web"}`, card.id))
	if got := h.followUp("8924"); got != bot.UserMessage(bot.ErrNotApprover) {
		t.Fatalf("outsider: %q", got)
	}
	h.fd.Send("INTERACTION_CREATE", editSubmit("8925", thread, requester, []string{modRole}, submit, `{"service":"web"}`, card.id))
	if got := h.followUp("8925"); got != bot.UserMessage(bot.ErrSelfApproval) {
		t.Fatalf("requester: %q", got)
	}
	if h.tool.runs.Load() != 0 || len(h.fd.Recorded("PATCH", "/channels/"+thread+"/messages/*")) != 0 {
		t.Fatal("refused edits changed something")
	}

	// A valid edit: it counts as the editor's allow and runs as edited.
	h.fd.Send("INTERACTION_CREATE", editSubmit("8926", thread, moderator, []string{modRole}, submit, "{\n  \"service\": \"web\"\n}", card.id))
	h.waitAnswer(thread, "Restarted web.")
	h.noFollowUp("8926")
	if n, args := h.tool.runs.Load(), h.tool.lastArgs(); n != 1 || args != `{"service":"web"}` {
		t.Fatalf("runs %d, last arguments %s", n, args)
	}
	res := toolResults(t, h.lastRequest())
	if len(res) != 1 || !strings.HasPrefix(res[0].Content, bot.EditedPrefix) || !strings.HasPrefix(res[0].Content, "An approver changed the arguments before running:") ||
		!strings.Contains(res[0].Content, `"web"`) {
		t.Fatalf("tool results %+v", res)
	}
	final := h.editedTo(thread, card.id, "the outcome", func(m postedCard) bool { return strings.Contains(statusOf(m), "succeeded") })
	if e := shown(field(final.embeds[0], editedLabel)); !strings.Contains(e, "Edited by** <@"+moderator+">") || !strings.Contains(e, `service: "api" → "web"`) {
		t.Fatalf("edited field %q", e)
	}
	if d := shown(final.embeds[0]["description"]); d != "Restart web in production" {
		t.Fatalf("read-back %q", d)
	}
	if !strings.Contains(statusOf(final), "allowed by <@"+moderator+">") || len(final.components) != 0 {
		t.Fatalf("status %q", statusOf(final))
	}
	// The model's arguments are kept beside the edit.
	events, err := h.db.AuditEvents(t.Context(), confirm.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(events, func(e confirm.AuditEvent) bool {
		return e.Kind == confirm.AuditEdited && e.Actor == moderator && strings.Contains(e.Detail, "api") && strings.Contains(e.Detail, "web")
	}) {
		t.Fatalf("no call_edited audit with both arguments: %+v", events)
	}
	h.checkNothingPings()
}

// TestRouteExtend: Extend on a card in an approvals channel pushes its
// deadline once: the card says who extended it and the new deadline, and
// loses the button; a second Extend (a stale button) changes nothing; a
// non-approver's changes nothing.
func TestRouteExtend(t *testing.T) {
	h := newHarnessWith(t, []bot.Channel{
		{Platform: Platform, ID: channelID, ApproverRoles: []string{modRole}, ApprovalsChannel: approvalsCh},
	}, nil)
	h.model.PushCalls(tc("c1", "restart_service", `{"service":"api"}`))
	h.start()

	h.fd.Send("MESSAGE_CREATE", guildMessage("7931", channelID, requester, mentionText("restart api"), true))
	h.threadFor("7931")
	card := h.card(approvalsCh, 1)
	extend := buttonsByAction(t, card.components)[actionExtend]
	if len(extend) != 1 {
		t.Fatalf("extend buttons %v", extend)
	}
	batch := strings.SplitN(strings.TrimPrefix(extend[0], "al:x:"), ".", 2)[0]
	before, err := h.db.Batch(t.Context(), batch)
	if err != nil {
		t.Fatal(err)
	}

	h.fd.Send("INTERACTION_CREATE", click("8931", approvalsCh, outsider, []string{otherRole}, extend[0], card.id))
	if got := h.followUp("8931"); got != bot.UserMessage(bot.ErrNotApprover) {
		t.Fatalf("outsider: %q", got)
	}
	h.fd.Send("INTERACTION_CREATE", click("8932", approvalsCh, moderator, []string{modRole}, extend[0], card.id))
	ext := h.editedTo(approvalsCh, card.id, "extended", func(m postedCard) bool { return strings.Contains(m.content, "Extended by") })
	h.noFollowUp("8932")
	after, err := h.db.Batch(t.Context(), batch)
	if err != nil {
		t.Fatal(err)
	}
	if got := after.ExpiresAt.Sub(before.ExpiresAt); got != 10*time.Minute || after.ExtendedBy != moderator {
		t.Fatalf("deadline moved by %v, extended by %q", got, after.ExtendedBy)
	}
	if !strings.Contains(ext.content, "Extended by <@"+moderator+">") || !strings.Contains(ext.content, "now expires at <t:"+strconv.FormatInt(after.ExpiresAt.Unix(), 10)+":t>") {
		t.Fatalf("extended card %q", ext.content)
	}
	if x := buttonsByAction(t, ext.components)[actionExtend]; len(x) != 0 {
		t.Fatalf("an extended card still offers Extend: %v", x)
	}
	h.fd.Send("INTERACTION_CREATE", click("8933", approvalsCh, moderator, []string{modRole}, extend[0], card.id))
	if got := h.followUp("8933"); got != bot.UserMessage(bot.ErrAlreadyExtended) {
		t.Fatalf("second extend: %q", got)
	}
	if again, _ := h.db.Batch(t.Context(), batch); !again.ExpiresAt.Equal(after.ExpiresAt) {
		t.Fatal("a second Extend moved the deadline")
	}
	h.checkNothingPings()
}
