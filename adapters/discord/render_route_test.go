package discord

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/internal/testkit"
)

// Rendering of issue 13: Edit…, Extend, an extension, escalation steps,
// an edited call, copies with a link to the conversation, and the
// thread's pointer.

// messageTexts are every text of a rendered message.
func messageTexts(m CardMessage) []string {
	texts := []string{m.Content}
	for _, e := range m.Embeds {
		texts = append(texts, e.Title, e.Description)
		for _, f := range e.Fields {
			texts = append(texts, f.Name, f.Value)
		}
	}
	return texts
}

func checkInert(t *testing.T, m CardMessage) {
	t.Helper()
	for _, s := range messageTexts(m) {
		if bad := liveMarkup(s); len(bad) != 0 {
			t.Errorf("live in %q: %v", s, bad)
		}
	}
}

// buttonLabels are a message's buttons' labels, row by row ("|" between
// buttons, " / " between rows).
func buttonLabels(m CardMessage) string {
	var rows []string
	for _, r := range m.Components {
		var labels []string
		for _, c := range r.(discordgo.ActionsRow).Components {
			labels = append(labels, c.(discordgo.Button).Label)
		}
		rows = append(rows, strings.Join(labels, "|"))
	}
	return strings.Join(rows, " / ")
}

// TestRenderEditAndExtendButtons: an editable waiting call offers Edit…
// (secondary, carrying its reference only), the card Extend 30m in a row
// of its own; with grants on a call's six buttons take two rows; a
// decided call and an extended card offer neither; arguments too large
// for the edit modal get no Edit….
func TestRenderEditAndExtendButtons(t *testing.T) {
	c := sampleCard()
	c.Calls[1].Editable, c.Calls[2].Editable = true, true
	c.ExtendRef, c.ExtendBy = c.Calls[1].Ref, 30*time.Minute
	golden(t, "card_editable.json", render(c))
	m := RenderMessages(c)[0]
	checkRows(t, m.Components)
	if got := buttonLabels(m); got != "Allow [2]|Deny [2]|Deny [2] with reason…|Edit [2]… / Allow [3]|Deny [3]|Deny [3] with reason…|Edit [3]… / Extend 30m" {
		t.Fatalf("buttons: %s", got)
	}
	byAction := buttonsByAction(t, componentMaps(t, m.Components))
	if e := byAction[actionEdit]; len(e) != 2 || e[0] != "al:e:"+c.Calls[1].Ref || e[1] != "al:e:"+c.Calls[2].Ref {
		t.Fatalf("edit buttons %v", e)
	}
	if x := byAction[actionExtend]; len(x) != 1 || x[0] != "al:x:"+c.Calls[1].Ref {
		t.Fatalf("extend buttons %v", x)
	}
	for _, id := range []string{"al:e:x.1", "al:f:x.1", "al:x:x.1"} {
		if _, ref, ok := parseCustomID(id); !ok || ref != "x.1" {
			t.Fatalf("parse %q", id)
		}
	}

	// Grants on and arguments cut: six buttons, two rows.
	g := c
	g.GrantFor = time.Hour
	g.Calls = append([]card.Call(nil), c.Calls...)
	g.Calls[1].Grantable = true
	g.Calls[1].Args = "{\n  \"note\": \"" + strings.Repeat("n", 3000) + "\"\n}"
	m = RenderMessages(g)[0]
	checkRows(t, m.Components)
	if got := buttonLabels(m); got != "Allow [2]|Allow [2] for 1h|Deny [2]|Deny [2] with reason… / Edit [2]…|Show full arguments [2] / Allow [3]|Deny [3]|Deny [3] with reason…|Edit [3]… / Extend 30m" {
		t.Fatalf("buttons with grants: %s", got)
	}

	// Arguments larger than the modal holds: no Edit… (the card still
	// offers them in full).
	big := c
	big.Calls = append([]card.Call(nil), c.Calls...)
	big.Calls[1].Args = "{\n  \"note\": \"" + strings.Repeat("n", MaxEditChars) + "\"\n}"
	if got := buttonLabels(RenderMessages(big)[0]); strings.Contains(got, "Edit [2]") || !strings.Contains(got, "Show full arguments [2]") {
		t.Fatalf("too large to edit: %s", got)
	}

	// Extended, or no call waiting for a person: no Extend.
	ext := c
	ext.Extended = &card.Extension{By: moderator, At: c.CreatedAt.Add(5 * time.Minute)}
	if got := buttonLabels(RenderMessages(ext)[0]); strings.Contains(got, "Extend") {
		t.Fatalf("extended card offers Extend: %s", got)
	}
	done := c
	done.Calls = append([]card.Call(nil), c.Calls...)
	at := c.CreatedAt.Add(time.Minute)
	done.Calls[1].State = card.State{Kind: card.Allowed, By: moderator, At: &at}
	done.Calls[2].State = card.State{Kind: card.Denied, By: moderator, At: &at}
	if m := RenderMessages(done)[0]; len(m.Components) != 0 || m.Components == nil {
		t.Fatalf("a decided card keeps buttons: %s", buttonLabels(m))
	}
}

// TestRenderFiveEditableCalls: five calls, each editable, with grants on
// and their arguments cut, and Extend: every message within Discord's
// limits (5 rows of at most 5 buttons, 10 embeds), every button there,
// and deciding them never moves a call to another message.
func TestRenderFiveEditableCalls(t *testing.T) {
	for _, grants := range []time.Duration{0, time.Hour} {
		t.Run(fmt.Sprint("grants=", grants), func(t *testing.T) {
			c := sampleCard()
			c.GrantFor = grants
			c.Calls = nil
			for i := range 5 {
				c.Calls = append(c.Calls, card.Call{Ref: confirm.Ref(c.BatchID, i), Number: i + 1, Key: fmt.Sprint(i), Tool: "restart_service",
					Summary: "Restart", Args: "{\n  \"note\": \"" + strings.Repeat("n", 1500) + "\"\n}",
					Flagged: true, Approvals: 1, Grantable: true, Editable: true, State: card.State{Kind: card.Waiting}})
			}
			c.ExtendRef, c.ExtendBy = c.Calls[0].Ref, 10*time.Minute
			msgs := RenderMessages(c)
			want := map[string]int{}
			calls := 0
			for _, m := range msgs {
				if len(m.Components) > maxRows || len(m.Embeds) > maxEmbeds {
					t.Fatalf("%d rows, %d embeds", len(m.Components), len(m.Embeds))
				}
				checkRows(t, m.Components)
				for a, ids := range buttonsByAction(t, componentMaps(t, m.Components)) {
					want[a] += len(ids)
				}
				calls += len(m.Embeds)
			}
			wantGrant := 0
			if grants > 0 {
				wantGrant = 5
			}
			if calls != 5 || want[actionAllow] != 5 || want[actionDeny] != 5 || want[actionReason] != 5 || want[actionEdit] != 5 ||
				want[actionShowArgs] != 5 || want[actionGrant] != wantGrant || want[actionExtend] != 1 {
				t.Fatalf("%d messages, %d calls, buttons %v", len(msgs), calls, want)
			}
			for i := range c.Calls {
				c.Calls[i].State = card.State{Kind: card.Expired}
				c.Calls[i].Editable, c.Calls[i].Grantable = false, false
			}
			done := RenderMessages(c)
			if len(done) != len(msgs) {
				t.Fatalf("%d messages once decided, %d before", len(done), len(msgs))
			}
			for i := range done {
				if len(done[i].Embeds) != len(msgs[i].Embeds) {
					t.Fatalf("message %d: a call moved", i)
				}
			}
		})
	}
}

// hostile is text from a model or a person that tries every trick.
const hostile = "@everyone @here <@123> <@&456> **bold** ||spoiler|| [x](http://evil.example) :skull: `code` \u202egnp.exe\u200b"

// TestRenderEditedCallHostile: an edited call says who edited it and each
// changed key, before → after; keys and values are the model's or the
// editor's words, shown inert (no mention, broadcast, markdown, link or
// hidden character acts); the read-back is the edited one.
func TestRenderEditedCallHostile(t *testing.T) {
	c := sampleCard()
	at := time.Date(2026, 11, 29, 16, 7, 0, 0, time.UTC)
	call := &c.Calls[1]
	call.Summary = "Restart " + hostile + " in production"
	call.Args = "{\n  \"environment\": \"production\",\n  \"service\": \"" + hostile + "\"\n}"
	call.Edited = &card.Edit{By: moderator, At: at, Changes: []card.Change{
		{Key: "service", Before: `"api"`, After: `"` + hostile + `"`},
		{Key: "# <@123> @here ||x|| \u202e", Before: "", After: "12"},
		{Key: "replicas", Before: "120", After: ""},
	}}
	golden(t, "card_edited.json", render(c))
	m := RenderMessages(c)[0]
	checkInert(t, m)
	e := embedMap(t, m.Embeds[1])
	edited := field(e, editedLabel)
	if !strings.HasPrefix(edited, fmt.Sprintf("✏️ **Edited by** <@%s> <t:%d:f>", moderator, at.Unix())) {
		t.Fatalf("edited: %q", edited)
	}
	seen := strings.NewReplacer("\u202e", `\u202e`, "\u200b", `\u200b`).Replace(hostile)
	for _, want := range []string{
		`service: "api" → "` + seen + `"`,
		`# <@123> @here ||x|| \u202e: (not set) → 12`,
		"replicas: 120 → (not set)",
	} {
		if !strings.Contains(shown(edited), want) {
			t.Errorf("edited %q lacks %q", shown(edited), want)
		}
	}
	if d := shown(e["description"]); d != "Restart "+seen+" in production" {
		t.Errorf("read-back %q", d)
	}
	// A hostile editor id is inert too.
	call.Edited.By = "<@&" + modRole + "> @everyone"
	checkInert(t, RenderMessages(c)[0])
}

// TestRenderExtendedAndEscalations: an extended card names who extended
// it and the new deadline (as a Discord timestamp); escalation steps are
// listed, fired and to come, their people named by mentions that never
// ping (a card's allowed_mentions is empty: see TestPostCardAndPointer).
func TestRenderExtendedAndEscalations(t *testing.T) {
	c := sampleCard()
	ext := c.CreatedAt.Add(20 * time.Minute)
	c.ExpiresAt = c.ExpiresAt.Add(30 * time.Minute)
	c.Extended = &card.Extension{By: moderator, At: ext}
	c.Escalations = []card.Escalation{
		{At: c.CreatedAt.Add(10 * time.Minute), Mention: confirm.Approvers{Roles: []string{modRole}}, Approvers: confirm.Approvers{Users: []string{approver2}}, Fired: true},
		{At: c.CreatedAt.Add(40 * time.Minute), Mention: confirm.Approvers{Users: []string{dmUser}, Roles: []string{"not a role <@&1>"}}},
	}
	golden(t, "card_extended.json", render(c))
	m := RenderMessages(c)[0]
	checkInert(t, m)
	testkit.ContainsAll(t, "content", m.Content,
		fmt.Sprintf("⏱️ Extended by <@%s> <t:%d:f>; now expires at <t:%d:t>.", moderator, ext.Unix(), c.ExpiresAt.Unix()),
		fmt.Sprintf("⏫ Escalated at <t:%d:t>: mentioned <@&%s>; may now also decide: <@%s>.", c.Escalations[0].At.Unix(), modRole, approver2),
		fmt.Sprintf("⏫ Escalates at <t:%d:t>: will mention <@%s>, role not a role \\<\\@\\&1\\>.", c.Escalations[1].At.Unix(), dmUser),
	)
	// Once decided, steps that never fired are not listed.
	at := ext
	c.Calls[1].State = card.State{Kind: card.Allowed, By: moderator, At: &at}
	c.Calls[2].State = card.State{Kind: card.Denied, By: moderator, At: &at}
	m = RenderMessages(c)[0]
	if !strings.Contains(m.Content, "⏫ Escalated") || strings.Contains(m.Content, "⏫ Escalates") || strings.Contains(m.Content, "now expires") {
		t.Errorf("decided card: %s", m.Content)
	}
	// Many steps: three shown, the rest counted.
	c = sampleCard()
	for i := range 5 {
		c.Escalations = append(c.Escalations, card.Escalation{At: c.CreatedAt.Add(time.Duration(i+1) * time.Minute), Mention: confirm.Approvers{Roles: []string{modRole}}})
	}
	if m := RenderMessages(c)[0]; strings.Count(m.Content, "⏫ Escalates") != 3 || !strings.Contains(m.Content, "⏫ … and 2 more escalation steps.") {
		t.Errorf("many steps: %s", m.Content)
	}
}

// TestRenderCopies: a copy in an approvals channel or a DM links back to
// the conversation ("View the conversation", a jump URL); a card in its
// own thread does not; a link that could break out of the markup is
// dropped.
func TestRenderCopies(t *testing.T) {
	c := sampleCard()
	link := "https://discord.com/channels/" + guildID + "/" + threadCh
	c.ThreadLink = link
	if m := RenderMessages(c)[0]; strings.Contains(m.Content, "View the conversation") {
		t.Fatalf("a card in its thread links to it: %s", m.Content)
	}
	c.Copy = card.CopyDM
	golden(t, "card_dm_copy.json", render(c))
	m := RenderMessages(c)[0]
	checkInert(t, m)
	if !strings.Contains(m.Content, "[View the conversation](<"+link+">)") || !strings.Contains(m.Content, "A copy of an approval card, sent to you as an approver.") {
		t.Fatalf("DM copy: %s", m.Content)
	}
	c.Copy = card.CopyApprovals
	m = RenderMessages(c)[0]
	if !strings.Contains(m.Content, "Posted here for approval; the conversation goes on in its own thread. [View the conversation](<"+link+">)") || strings.Contains(m.Content, "A copy of") {
		t.Fatalf("approvals copy: %s", m.Content)
	}
	for _, bad := range []string{
		"http://discord.com/channels/1/2", "javascript:alert(1)", link + ">) @everyone [x](<https://evil",
		link + " @everyone", link + "\u202e", "https://user:pw@discord.com/x", "discord.com/channels/1/2",
		"https://evil.example/channels/1/2", "https://discord.com/channels/1", "https://discord.com/channels/1/2/3/4",
		"https://discord.com/channels/x/2", "https://discord.com/channels/1/2?x=[y](z)",
	} {
		c.ThreadLink = bad
		m := RenderMessages(c)[0]
		if strings.Contains(m.Content, "View the conversation") {
			t.Errorf("link %q rendered: %s", bad, m.Content)
		}
		checkInert(t, m)
	}
}

// TestRenderPointer: the thread's pointer names the approvals channel
// (a channel mention, which pings nobody) and links to the card; once
// decided it says where each call stands, inert; it never has buttons.
func TestRenderPointer(t *testing.T) {
	c := sampleCard()
	cardLink := "https://discord.com/channels/" + guildID + "/" + approvalsCh + "/9100"
	p := card.Pointer{BatchID: c.BatchID, Channel: approvalsCh, CardLink: cardLink, Status: confirm.BatchPending, Calls: c.Calls}
	waiting := RenderPointer(p)
	golden(t, "pointer_waiting.json", waiting)
	if waiting.Content != "⏳ Waiting for approval in <#"+approvalsCh+"> — [View the card](<"+cardLink+">)" {
		t.Fatalf("waiting pointer: %q", waiting.Content)
	}
	if waiting.Components == nil || len(waiting.Components) != 0 || len(waiting.Embeds) != 0 {
		t.Fatal("a pointer has components or embeds")
	}
	at := time.Date(2026, 11, 29, 16, 6, 0, 0, time.UTC)
	calls := append([]card.Call(nil), c.Calls...)
	calls[0].Run = confirm.RunSucceeded
	calls[1].State, calls[1].Run = card.State{Kind: card.Allowed, By: moderator, At: &at}, confirm.RunSucceeded
	calls[2].State = card.State{Kind: card.Denied, By: approver2, At: &at, Reason: hostile}
	p.Calls, p.Status = calls, confirm.BatchDone
	done := RenderPointer(p)
	golden(t, "pointer_complete.json", done)
	checkInert(t, done)
	for _, want := range []string{
		"Approval request in <#" + approvalsCh + "> closed — [View the card](<" + cardLink + ">)",
		"[2] restart_service: ✅ allowed by <@" + moderator + ">",
		"[3] timeout_member: ❌ denied by <@" + approver2 + ">",
	} {
		if !strings.Contains(shown(done.Content), want) {
			t.Errorf("complete pointer lacks %q: %s", want, done.Content)
		}
	}
	// A channel that is not an id, and no link: still inert, still a pointer.
	p.Channel, p.CardLink, p.Calls = "<#1> @everyone", "", c.Calls
	m := RenderPointer(p)
	checkInert(t, m)
	if m.Content != "⏳ Waiting for approval in the approvals channel" {
		t.Fatalf("pointer without id or link: %q", m.Content)
	}
}

// TestEditModal: the modal's one paragraph input holds the arguments
// (at most 4000 characters), its custom id carries the call's reference
// only, and its labels fit Discord's limits.
func TestEditModal(t *testing.T) {
	d := EditModal("abcdefghijklmnopqrstuvwxyz.1", 2, "{\n  \"service\": \"api\"\n}")
	golden(t, "edit_modal.json", d)
	in := d.Components[0].(discordgo.ActionsRow).Components[0].(discordgo.TextInput)
	if d.CustomID != "al:f:abcdefghijklmnopqrstuvwxyz.1" || runes(d.Title) > 45 || runes(in.Label) > 45 ||
		in.Style != discordgo.TextInputParagraph || in.MaxLength != MaxEditChars || in.CustomID != EditInputID || !in.Required {
		t.Fatalf("modal %+v, input %+v", d, in)
	}
}
