package discord

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/confirm"
)

// End to end, over the fake gateway and REST API with the real discordgo
// client, SQLite storage and bot: approvals from several people, "Allow
// for" grants and their Revoke.

// twoApprovals asks two distinct approvals for every call of the named
// tool (as a rule would), through the configured policy.
func twoApprovals(tool string) func(*bot.Config) {
	return func(c *bot.Config) {
		c.GrantFor = time.Hour // offered only where a grant may allow: not here
		c.Policy = confirm.NewPolicy(true, nil, confirm.PolicyFunc(func(r confirm.Request) confirm.Verdict {
			if r.Call.Name != tool {
				return confirm.Verdict{}
			}
			return confirm.Verdict{Ask: true, Approvals: 2, Reasons: []confirm.Reason{{Kind: confirm.ReasonRule, Rule: "prod-restarts"}}}
		}))
	}
}

// quorumChannels: the ops channel's approvers are the moderator role and
// approver2 by user id.
func quorumChannels() []bot.Channel {
	return []bot.Channel{{Platform: Platform, ID: channelID, Approvers: []string{approver2}, ApproverRoles: []string{modRole}}}
}

// followUp waits for the ephemeral follow-up of interaction id and
// returns its text.
func (h *harness) followUp(id string) string {
	h.t.Helper()
	fu := h.fd.WaitFor("POST", "/webhooks/"+botID+"/token-"+id, 1)[0].JSON(h.t)
	if fu["flags"] != float64(discordgo.MessageFlagsEphemeral) {
		h.t.Fatalf("follow-up of %s is not ephemeral: %v", id, fu)
	}
	if am, _ := fu["allowed_mentions"].(map[string]any); am == nil || len(am["parse"].([]any)) != 0 {
		h.t.Fatalf("follow-up of %s may ping: %v", id, fu)
	}
	s, _ := fu["content"].(string)
	return s
}

// noFollowUp checks a click that counted got no ephemeral answer.
func (h *harness) noFollowUp(id string) {
	h.t.Helper()
	if fus := h.fd.Recorded("POST", "/webhooks/"+botID+"/token-"+id); len(fus) != 0 {
		h.t.Fatalf("click %s got a follow-up: %s", id, fus[0].Body)
	}
}

// edits waits for the n-th edit of a message and returns it.
func (h *harness) edit(channel, id string, n int) postedCard {
	h.t.Helper()
	edits := h.fd.WaitFor("PATCH", "/channels/"+channel+"/messages/"+id, n)
	return decodeMessage(h.t, edits[n-1])
}

// checkInertEdits checks every edit of the thread's messages pings nobody.
func (h *harness) checkInertEdits(thread string) {
	h.t.Helper()
	for _, e := range h.fd.Recorded("PATCH", "/channels/"+thread+"/messages/*") {
		if _, am := postedMentions(h.t, e); len(am.Parse)+len(am.Users)+len(am.Roles) != 0 {
			h.t.Fatalf("an edit may ping: %+v", am)
		}
	}
}

// TestQuorumTwoApprovers: a call needing two approvals. The requester's
// own Allow is refused (self-approval off), though they hold the approver
// role; a moderator's Allow leaves the card waiting with "1 of 2
// approvals" and its buttons; the same moderator again is refused; a
// second, different approver's Allow runs the call once and the card
// names both.
func TestQuorumTwoApprovers(t *testing.T) {
	h := newHarnessWith(t, quorumChannels(), twoApprovals("restart_service"))
	h.startWith(tc("c1", "restart_service", `{"service":"api"}`), "Restarted api.")

	thread, card := h.askForCard("7401", "restart api")
	if got := shown(field(card.embeds[0], flagReasonLabel)); got != "needs 2 approvals: the tool needs approval; rule prod-restarts" {
		t.Fatalf("why: %q", got)
	}
	if got := field(card.embeds[0], statusLabel); got != "⏳ waiting for a decision: 0 of 2 approvals" {
		t.Fatalf("status: %q", got)
	}
	allow, _, _ := buttonIDs(t, card.components)
	if len(allow) != 1 {
		t.Fatalf("allow buttons: %v", allow)
	}
	if g := grantIDs(t, card.components); len(g) != 0 {
		t.Fatalf("a call needing two approvals offers a grant: %v", g)
	}
	ref := strings.TrimPrefix(allow[0], "al:a:")

	// The requester, holding the approver role: refused, audited.
	h.fd.Send("INTERACTION_CREATE", click("8401", thread, requester, []string{modRole}, allow[0], card.id))
	if got := h.followUp("8401"); got != bot.UserMessage(bot.ErrSelfApproval) {
		t.Fatalf("self-approval answer %q", got)
	}
	// "Allow for" crafted for this call: refused (it needs two people).
	h.fd.Send("INTERACTION_CREATE", click("8402", thread, moderator, []string{modRole}, "al:g:"+ref, card.id))
	if got := h.followUp("8402"); got != bot.UserMessage(bot.ErrNotGrantable) {
		t.Fatalf("grant answer %q", got)
	}
	if n := len(h.fd.Recorded("PATCH", "/channels/"+thread+"/messages/*")); n != 0 || h.tool.runs.Load() != 0 {
		t.Fatalf("refused clicks changed something: %d edits, %d runs", n, h.tool.runs.Load())
	}

	// The first approval: the card stays open, with progress.
	h.fd.Send("INTERACTION_CREATE", click("8403", thread, moderator, []string{otherRole, modRole}, allow[0], card.id))
	mid := h.edit(thread, card.id, 1)
	if got := field(mid.embeds[0], statusLabel); got != "⏳ waiting for a decision: 1 of 2 approvals: <@"+moderator+">" {
		t.Fatalf("status after one approval: %q", got)
	}
	if a, d, r := buttonIDs(t, mid.components); !slices.Equal(a, allow) || len(d) != 1 || len(r) != 1 {
		t.Fatalf("buttons after one approval: %v %v %v", a, d, r)
	}
	h.noFollowUp("8403")
	if h.tool.runs.Load() != 0 {
		t.Fatal("one approval of two ran the call")
	}

	// The same approver again: refused, nothing changes.
	h.fd.Send("INTERACTION_CREATE", click("8404", thread, moderator, []string{modRole}, allow[0], card.id))
	if got := h.followUp("8404"); got != bot.UserMessage(&bot.VoteError{Remaining: 1}) || !strings.Contains(got, "already approved") {
		t.Fatalf("second vote answer %q", got)
	}
	if n := len(h.fd.Recorded("PATCH", "/channels/"+thread+"/messages/"+card.id)); n != 1 || h.tool.runs.Load() != 0 {
		t.Fatalf("a repeated approval changed something: %d edits, %d runs", n, h.tool.runs.Load())
	}

	// A second, different approver (by user id): the call runs, once.
	h.fd.Send("INTERACTION_CREATE", click("8405", thread, approver2, nil, allow[0], card.id))
	h.waitAnswer(thread, "Restarted api.")
	h.noFollowUp("8405")
	if n := h.tool.runs.Load(); n != 1 {
		t.Fatalf("runs: %d, want 1", n)
	}
	final := h.lastEdit(thread, card.id)
	status := field(final.embeds[0], statusLabel)
	if len(final.components) != 0 || !strings.Contains(status, "allowed by <@"+moderator+"> and <@"+approver2+">") || !strings.Contains(status, "succeeded") {
		t.Fatalf("final card: %q, %d rows", status, len(final.components))
	}
	// A late click changes nothing.
	h.fd.Send("INTERACTION_CREATE", click("8406", thread, approver2, nil, allow[0], card.id))
	if got := h.followUp("8406"); got != bot.UserMessage(bot.ErrAlreadyClosed) || h.tool.runs.Load() != 1 {
		t.Fatalf("late click: %q, %d runs", got, h.tool.runs.Load())
	}
	events, err := h.db.AuditEvents(context.Background(), confirm.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(events, func(e confirm.AuditEvent) bool {
		return e.Kind == confirm.AuditRejectedClick && e.Actor == requester && strings.Contains(e.Detail, "self-approval")
	}) {
		t.Fatal("the refused self-approval was not audited")
	}
	h.checkInertEdits(thread)
}

// TestModerationQuorumNamesLastApprover: a moderation tool needing two
// approvals writes the last approver to the server's audit log.
func TestModerationQuorumNamesLastApprover(t *testing.T) {
	h := newHarnessWith(t, quorumChannels(), twoApprovals(ToolKickMember))
	mods, err := ModerationTools([]string{ToolKickMember}, h.a.Session())
	if err != nil {
		t.Fatal(err)
	}
	if err := h.set.Add(mods[0]); err != nil {
		t.Fatal(err)
	}
	h.startWith(tc("c1", ToolKickMember, `{"user":"`+spammer+`","reason":"raid"}`), "Kicked.")

	thread, card := h.askForCard("7451", "kick the raider")
	allow, _, _ := buttonIDs(t, card.components)
	h.fd.Send("INTERACTION_CREATE", click("8451", thread, approver2, nil, allow[0], card.id))
	h.edit(thread, card.id, 1)
	h.fd.Send("INTERACTION_CREATE", click("8452", thread, moderator, []string{modRole}, allow[0], card.id))
	h.waitAnswer(thread, "Kicked.")
	kicks := h.fd.Recorded("DELETE", "/guilds/"+guildID+"/members/"+spammer)
	if len(kicks) != 1 {
		t.Fatalf("kicks: %d", len(kicks))
	}
	if r, err := url.PathUnescape(kicks[0].Header.Get("X-Audit-Log-Reason")); err != nil || r != "Approved by "+moderator+" via Airlock: raid" {
		t.Fatalf("audit log reason %q (%v)", r, err)
	}
}

// notice waits for the n-th grant notice posted in channel (a message
// with a Revoke button).
func (h *harness) notice(channel string, n int) postedCard {
	h.t.Helper()
	return h.nthPosted(channel, n, `"custom_id":"al:v:`, fmt.Sprintf("no grant notice %d in %s", n, channel))
}

// cards counts the card messages (with Allow buttons) posted in channel.
func (h *harness) cards(channel string) int {
	n := 0
	for _, c := range h.fd.Recorded("POST", "/channels/"+channel+"/messages") {
		if strings.Contains(string(c.Body), `"custom_id":"al:a:`) {
			n++
		}
	}
	return n
}

// TestGrantAllowForAndRevoke: "Allow for 1h" allows the call and posts a
// notice with Revoke; the next call of the tool in the thread runs
// without a card; a non-approver's Revoke changes nothing; a role
// holder's Revoke edits the notice (no button) and the next call needs a
// card again.
func TestGrantAllowForAndRevoke(t *testing.T) {
	h := newHarnessWith(t, defaultChannels(), func(c *bot.Config) { c.GrantFor = time.Hour })
	h.model.PushCalls(tc("c1", "restart_service", `{"service":"api"}`))
	h.model.PushText("Restarted api.")
	h.model.PushCalls(tc("c2", "restart_service", `{"service":"web"}`))
	h.model.PushText("Restarted web.")
	h.model.PushCalls(tc("c3", "restart_service", `{"service":"db"}`))
	h.start()

	thread, card := h.askForCard("7501", "restart api")
	grant := grantIDs(t, card.components)
	allow, _, _ := buttonIDs(t, card.components)
	if len(grant) != 1 || grant[0] != "al:g:"+strings.TrimPrefix(allow[0], "al:a:") {
		t.Fatalf("grant buttons %v (allow %v)", grant, allow)
	}
	row := card.components[0]["components"].([]any)
	if b := row[1].(map[string]any); b["label"] != "Allow for 1h" || b["custom_id"] != grant[0] {
		t.Fatalf("the button next to Allow: %v", b)
	}

	// A non-approver's "Allow for": refused.
	h.fd.Send("INTERACTION_CREATE", click("8501", thread, outsider, []string{otherRole}, grant[0], card.id))
	if got := h.followUp("8501"); got != bot.UserMessage(bot.ErrNotApprover) {
		t.Fatalf("outsider's grant: %q", got)
	}

	// A moderator's "Allow for 1h": the call runs, a notice with Revoke.
	before := time.Now()
	h.fd.Send("INTERACTION_CREATE", click("8502", thread, moderator, []string{modRole}, grant[0], card.id))
	h.waitAnswer(thread, "Restarted api.")
	h.noFollowUp("8502")
	if n := h.tool.runs.Load(); n != 1 {
		t.Fatalf("runs: %d", n)
	}
	if status := field(h.lastEdit(thread, card.id).embeds[0], statusLabel); !strings.Contains(status, "allowed by <@"+moderator+">") {
		t.Fatalf("card status %q", status)
	}
	notice := h.notice(thread, 1)
	if !strings.Contains(notice.content, "<@"+moderator+">") || !strings.Contains(notice.content, `restart\_service`) || !strings.Contains(notice.content, "<t:") {
		t.Fatalf("notice %q", notice.content)
	}
	if bad := liveMarkup(notice.content); len(bad) != 0 {
		t.Fatalf("notice live: %v", bad)
	}
	noticePost := h.fd.Recorded("POST", "/channels/"+thread+"/messages")
	for _, p := range noticePost {
		if _, am := postedMentions(t, p); len(am.Parse)+len(am.Users)+len(am.Roles) != 0 {
			t.Fatalf("a message may ping: %+v", am)
		}
	}
	revoke := buttonsByAction(t, notice.components)[actionRevoke]
	if len(notice.components) != 1 || len(revoke) != 1 || !strings.HasPrefix(revoke[0], "al:v:grant-") || len(revoke[0]) > 100 {
		t.Fatalf("notice buttons %v", notice.components)
	}
	grants, err := h.db.Grants(context.Background(), confirm.GrantFilter{})
	if err != nil || len(grants) != 1 {
		t.Fatalf("grants %v (%v)", grants, err)
	}
	if g := grants[0]; revoke[0] != "al:v:"+confirm.GrantRef(g.ID) || g.CreatedBy != moderator || g.Tool != "restart_service" ||
		g.NoticeRef != notice.id || g.ExpiresAt.Before(before.Add(59*time.Minute)) || g.ExpiresAt.After(time.Now().Add(61*time.Minute)) {
		t.Fatalf("grant %+v, notice %s", g, notice.id)
	}

	// The next call of the tool in the thread: no card, it runs.
	h.fd.Send("MESSAGE_CREATE", guildMessage("7502", thread, requester, mentionText("and web"), true))
	h.waitAnswer(thread, "Restarted web.")
	if n := h.tool.runs.Load(); n != 2 {
		t.Fatalf("runs: %d, want 2", n)
	}
	if n := h.cards(thread); n != 1 {
		t.Fatalf("cards: %d, want 1 (the grant covered the second call)", n)
	}

	// A non-approver's Revoke: nothing changes.
	h.fd.Send("INTERACTION_CREATE", click("8503", thread, outsider, []string{otherRole}, revoke[0], notice.id))
	if cb := h.callback("8503"); cb["type"] != float64(discordgo.InteractionResponseDeferredMessageUpdate) {
		t.Fatalf("callback: %v", cb)
	}
	if got := h.followUp("8503"); got != bot.UserMessage(bot.ErrNotApprover) {
		t.Fatalf("outsider's revoke: %q", got)
	}
	if n := len(h.fd.Recorded("PATCH", "/channels/"+thread+"/messages/"+notice.id)); n != 0 {
		t.Fatal("a non-approver's Revoke edited the notice")
	}
	if g, _ := h.db.Grant(context.Background(), grants[0].ID); g.RevokedAt != nil {
		t.Fatal("a non-approver revoked the grant")
	}

	// A role holder's Revoke: the notice says so, without the button.
	h.fd.Send("INTERACTION_CREATE", click("8504", thread, moderator, []string{modRole}, revoke[0], notice.id))
	revoked := h.edit(thread, notice.id, 1)
	h.noFollowUp("8504")
	if len(revoked.components) != 0 || !strings.Contains(revoked.content, "**Revoked by** <@"+moderator+">") {
		t.Fatalf("revoked notice %q %v", revoked.content, revoked.components)
	}
	var raw struct {
		Components []any `json:"components"`
	}
	if err := json.Unmarshal(h.fd.Recorded("PATCH", "/channels/"+thread+"/messages/"+notice.id)[0].Body, &raw); err != nil || raw.Components == nil {
		t.Fatalf("the edit does not clear the components (%v)", err)
	}
	if g, _ := h.db.Grant(context.Background(), grants[0].ID); g.RevokedAt == nil || g.RevokedBy != moderator {
		t.Fatalf("grant not revoked: %+v", g)
	}
	// Again: nothing more to revoke.
	h.fd.Send("INTERACTION_CREATE", click("8505", thread, moderator, []string{modRole}, revoke[0], notice.id))
	if got := h.followUp("8505"); got != bot.UserMessage(bot.ErrGrantNotActive) {
		t.Fatalf("second revoke: %q", got)
	}
	// A call reference on the Revoke action, and a grant reference on Allow: unknown.
	h.fd.Send("INTERACTION_CREATE", click("8506", thread, moderator, []string{modRole}, "al:v:"+strings.TrimPrefix(allow[0], "al:a:"), notice.id))
	h.fd.Send("INTERACTION_CREATE", click("8507", thread, moderator, []string{modRole}, "al:a:"+strings.TrimPrefix(revoke[0], "al:v:"), notice.id))
	for _, id := range []string{"8506", "8507"} {
		if got := h.followUp(id); got != bot.UserMessage(confirm.ErrBadRef) {
			t.Fatalf("crossed reference %s: %q", id, got)
		}
	}

	// After the revoke, the next call needs a card again.
	h.fd.Send("MESSAGE_CREATE", guildMessage("7503", thread, requester, mentionText("and db"), true))
	next := h.card(thread, 3) // card, notice, card
	if !strings.Contains(next.content, "Approval needed") || h.cards(thread) != 2 {
		t.Fatalf("no new card after the revoke: %q", next.content)
	}
	if n := h.tool.runs.Load(); n != 2 {
		t.Fatalf("runs: %d, want 2", n)
	}
	h.checkInertEdits(thread)
}
