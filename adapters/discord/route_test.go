package discord

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
)

// Edit…, Extend and routing against a recording fake of the adapter's
// Bot (the real bot's side is in e2e_route_test.go), over the fake
// gateway and REST API with the real discordgo client.

// editCall is one bot.Edit the adapter made.
type editCall struct {
	Click bot.Click
	Args  string
}

// recBot records the clicks the adapter hands the bot and answers as
// told.
type recBot struct {
	nopBot
	mu        sync.Mutex
	form      bot.EditForm
	formErr   error
	editErr   error
	extendErr error
	forms     []bot.Click
	edits     []editCall
	extends   []bot.Click
	decides   []bot.Click
}

func (r *recBot) Interact(ctx context.Context, in bot.Interaction) (bot.Reply, error) {
	return bot.Dispatch(ctx, r, in)
}

func (r *recBot) EditForm(_ context.Context, c bot.Click) (bot.EditForm, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.forms = append(r.forms, c)
	return r.form, r.formErr
}

func (r *recBot) Edit(_ context.Context, c bot.Click, args string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.edits = append(r.edits, editCall{c, args})
	return r.editErr
}

func (r *recBot) Extend(_ context.Context, c bot.Click) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.extends = append(r.extends, c)
	return r.extendErr
}

func (r *recBot) Decide(_ context.Context, c bot.Click) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.decides = append(r.decides, c)
	return nil
}

func (r *recBot) set(f func(r *recBot)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(r)
}

func (r *recBot) get() (forms []bot.Click, edits []editCall, extends, decides []bot.Click) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]bot.Click(nil), r.forms...), append([]editCall(nil), r.edits...),
		append([]bot.Click(nil), r.extends...), append([]bot.Click(nil), r.decides...)
}

// newRecHarness runs an adapter for a recBot against a fake Discord.
func newRecHarness(t *testing.T) (*harness, *recBot) {
	t.Helper()
	fd := newFakeDiscord(t, true)
	rb := &recBot{}
	a, err := New(Config{Token: testToken, APIURL: fd.APIURL()}, rb)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, fd: fd, a: a}
	h.start()
	return h, rb
}

// waitRec polls the recBot until cond holds.
func waitRec(t *testing.T, rb *recBot, what string, cond func(forms []bot.Click, edits []editCall, extends, decides []bot.Click) bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(rb.get()); {
		if time.Now().After(deadline) {
			t.Fatalf("waited for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// ephemeralCallback checks an interaction was answered with an ephemeral
// message pinging nobody, and returns its text.
func (h *harness) ephemeralCallback(id string) string {
	h.t.Helper()
	cb := h.callback(id)
	data, _ := cb["data"].(map[string]any)
	if cb["type"] != float64(discordgo.InteractionResponseChannelMessageWithSource) || data["flags"] != float64(discordgo.MessageFlagsEphemeral) {
		h.t.Fatalf("callback of %s is not an ephemeral message: %v", id, cb)
	}
	if am, _ := data["allowed_mentions"].(map[string]any); am == nil || len(am["parse"].([]any)) != 0 {
		h.t.Fatalf("callback of %s may ping: %v", id, cb)
	}
	s, _ := data["content"].(string)
	return s
}

const recRef = "abcdefghijklmnopqrstuvwxyz.1"

// TestEditButtonOpensModal: Edit… asks the bot first (with the click's
// message, user, roles and conversation channel), then answers with the
// modal: the call's pretty arguments (hidden characters as JSON escapes,
// which mean the same) in one paragraph input, the call's reference in
// its custom id. The bot's refusal is the clicker's ephemeral answer, and
// no modal opens.
func TestEditButtonOpensModal(t *testing.T) {
	h, rb := newRecHarness(t)
	args := "{\n  \"replicas\": 12,\n  \"service\": \"web\u202e\"\n}"
	rb.set(func(r *recBot) {
		r.form = bot.EditForm{Ref: recRef, Number: 2, Tool: "scale", Args: args, Summary: "Scale web to 12"}
	})
	h.fd.Send("INTERACTION_CREATE", click("8801", threadCh, moderator, []string{modRole}, "al:e:"+recRef, "9100"))
	cb := h.callback("8801")
	if cb["type"] != float64(discordgo.InteractionResponseModal) {
		t.Fatalf("callback: %v", cb)
	}
	var modal struct {
		CustomID   string `json:"custom_id"`
		Title      string `json:"title"`
		Components []struct {
			Components []struct {
				Type      int    `json:"type"`
				CustomID  string `json:"custom_id"`
				Style     int    `json:"style"`
				Value     string `json:"value"`
				MaxLength int    `json:"max_length"`
				Required  bool   `json:"required"`
			} `json:"components"`
		} `json:"components"`
	}
	raw, _ := json.Marshal(cb["data"])
	if err := json.Unmarshal(raw, &modal); err != nil || len(modal.Components) != 1 || len(modal.Components[0].Components) != 1 {
		t.Fatalf("modal %s (%v)", raw, err)
	}
	in := modal.Components[0].Components[0]
	if modal.CustomID != "al:f:"+recRef || modal.Title != "Edit call 2" || in.Type != 4 || in.CustomID != EditInputID ||
		in.Style != int(discordgo.TextInputParagraph) || in.MaxLength != MaxEditChars || !in.Required {
		t.Fatalf("modal %s", raw)
	}
	if in.Value != strings.ReplaceAll(args, "\u202e", `\u202e`) {
		t.Fatalf("modal value %q", in.Value)
	}
	var same, orig any
	json.Unmarshal([]byte(in.Value), &same)
	json.Unmarshal([]byte(args), &orig)
	if !jsonEqual(same, orig) {
		t.Fatal("the modal's arguments mean something else than the call's")
	}
	forms, _, _, _ := rb.get()
	if len(forms) != 1 || forms[0].Platform != Platform || forms[0].Channel != channelID || forms[0].Message != "9100" ||
		forms[0].User != moderator || forms[0].Ref != recRef || len(forms[0].Roles) != 1 || forms[0].Roles[0] != modRole || forms[0].IsBot {
		t.Fatalf("EditForm clicks: %+v", forms)
	}

	// The bot refuses: the clicker is told, no modal.
	rb.set(func(r *recBot) { r.formErr = bot.ErrNotApprover })
	h.fd.Send("INTERACTION_CREATE", click("8802", threadCh, outsider, nil, "al:e:"+recRef, "9100"))
	if got := h.ephemeralCallback("8802"); got != bot.UserMessage(bot.ErrNotApprover) {
		t.Fatalf("refusal: %q", got)
	}
	// An edit submit's custom id on a button, and Edit… in a modal: unknown.
	h.fd.Send("INTERACTION_CREATE", click("8803", threadCh, moderator, []string{modRole}, "al:f:"+recRef, "9100"))
	if got := h.ephemeralCallback("8803"); got != unknownButton {
		t.Fatalf("crafted button: %q", got)
	}
	h.fd.Send("INTERACTION_CREATE", editSubmit("8804", threadCh, moderator, []string{modRole}, "al:e:"+recRef, "{}", "9100"))
	if got := h.ephemeralCallback("8804"); got != unknownButton {
		t.Fatalf("crafted modal: %q", got)
	}
	if _, edits, _, _ := rb.get(); len(edits) != 0 {
		t.Fatalf("crafted interactions reached Edit: %+v", edits)
	}
	if n := len(h.fd.Recorded("POST", "/channels/*")) + len(h.fd.Recorded("PATCH", "/channels/*")); n != 0 {
		t.Fatalf("%d messages posted or edited", n)
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return a != nil && string(x) == string(y)
}

// TestEditTooLarge: arguments longer than the modal holds are refused
// ephemerally, saying why; no modal opens.
func TestEditTooLarge(t *testing.T) {
	h, rb := newRecHarness(t)
	args := "{\n  \"note\": \"" + strings.Repeat("x", MaxEditChars) + "\"\n}"
	rb.set(func(r *recBot) { r.form = bot.EditForm{Ref: recRef, Number: 2, Tool: "note", Args: args} })
	h.fd.Send("INTERACTION_CREATE", click("8811", threadCh, moderator, []string{modRole}, "al:e:"+recRef, "9100"))
	got := h.ephemeralCallback("8811")
	if !strings.Contains(got, "too large to edit in Discord") || !strings.Contains(got, "4,000") || !strings.Contains(got, "Nothing changed") {
		t.Fatalf("answer %q", got)
	}
	// Hidden characters count as their escapes: 3,995 of them do not fit.
	rb.set(func(r *recBot) { r.form.Args = `"` + strings.Repeat("\u200b", 700) + `"` })
	h.fd.Send("INTERACTION_CREATE", click("8812", threadCh, moderator, []string{modRole}, "al:e:"+recRef, "9100"))
	if got := h.ephemeralCallback("8812"); !strings.Contains(got, "too large") {
		t.Fatalf("answer %q", got)
	}
}

// TestEditSubmitRefused: a submitted edit the bot refuses for what it
// says (*bot.EditError) is answered to the editor alone, escaped, saying
// nothing changed; nothing else is posted or edited. The submit carries
// the card's message id (Discord sends the message a modal was opened
// from); without it Message is "" and the bot refuses.
func TestEditSubmitRefused(t *testing.T) {
	h, rb := newRecHarness(t)
	rb.set(func(r *recBot) {
		r.editErr = &bot.EditError{Message: "/replicas: must be at most 50, got 120 <@" + moderator + "> @everyone ||x||."}
	})
	const args = "{\"replicas\": 120, \"service\": \"web\"}"
	h.fd.Send("INTERACTION_CREATE", editSubmit("8821", threadCh, moderator, []string{modRole}, "al:f:"+recRef, args, "9100"))
	if cb := h.callback("8821"); cb["type"] != float64(discordgo.InteractionResponseDeferredMessageUpdate) {
		t.Fatalf("callback: %v", cb)
	}
	got := h.followUp("8821")
	if !strings.HasPrefix(got, "Edit refused: ") || !strings.HasSuffix(got, ". Nothing changed.") ||
		shown(got) != "Edit refused: /replicas: must be at most 50, got 120 <@"+moderator+"> @everyone ||x||. Nothing changed." {
		t.Fatalf("answer %q", got)
	}
	if bad := liveMarkup(got); len(bad) != 0 {
		t.Fatalf("answer live: %v", bad)
	}
	_, edits, _, _ := rb.get()
	if len(edits) != 1 || edits[0].Args != args || edits[0].Click.Message != "9100" || edits[0].Click.Ref != recRef ||
		edits[0].Click.User != moderator || edits[0].Click.Channel != channelID {
		t.Fatalf("edits: %+v", edits)
	}
	if n := len(h.fd.Recorded("POST", "/channels/*")) + len(h.fd.Recorded("PATCH", "/channels/*")) + len(h.fd.Recorded("PATCH", "/webhooks/*")); n != 0 {
		t.Fatalf("%d messages posted or edited besides the answer", n)
	}
	if n := len(h.fd.Recorded("POST", "/webhooks/*")); n != 1 {
		t.Fatalf("%d follow-ups, want the one answer", n)
	}

	// Other refusals are told as for a click; no message: Message "".
	rb.set(func(r *recBot) { r.editErr = bot.ErrAlreadyClosed })
	h.fd.Send("INTERACTION_CREATE", editSubmit("8822", threadCh, moderator, []string{modRole}, "al:f:"+recRef, args, ""))
	if got := h.followUp("8822"); got != bot.UserMessage(bot.ErrAlreadyClosed) {
		t.Fatalf("answer %q", got)
	}
	if _, edits, _, _ := rb.get(); len(edits) != 2 || edits[1].Click.Message != "" {
		t.Fatalf("edits: %+v", edits)
	}
	// Accepted: no answer (the bot updates the card).
	rb.set(func(r *recBot) { r.editErr = nil })
	h.fd.Send("INTERACTION_CREATE", editSubmit("8823", threadCh, moderator, []string{modRole}, "al:f:"+recRef, args, "9100"))
	waitRec(t, rb, "the third edit", func(_ []bot.Click, e []editCall, _, _ []bot.Click) bool { return len(e) == 3 })
	h.callback("8823")
	time.Sleep(50 * time.Millisecond)
	h.noFollowUp("8823")
}

// TestExtendClick: Extend is acknowledged at once and handed to the bot
// with the card's message; a refusal (already extended) is answered
// ephemerally. Allow clicks carry the message too, in a DM as well.
func TestExtendClick(t *testing.T) {
	h, rb := newRecHarness(t)
	h.fd.Send("INTERACTION_CREATE", click("8831", approvalsCh, moderator, []string{modRole}, "al:x:"+recRef, "9100"))
	if cb := h.callback("8831"); cb["type"] != float64(discordgo.InteractionResponseDeferredMessageUpdate) {
		t.Fatalf("callback: %v", cb)
	}
	waitRec(t, rb, "Extend", func(_ []bot.Click, _ []editCall, x, _ []bot.Click) bool { return len(x) == 1 })
	_, _, extends, _ := rb.get()
	if c := extends[0]; c.Message != "9100" || c.Ref != recRef || c.Channel != approvalsCh || c.User != moderator || c.Allow {
		t.Fatalf("extend click %+v", c)
	}
	h.noFollowUp("8831")
	rb.set(func(r *recBot) { r.extendErr = bot.ErrAlreadyExtended })
	h.fd.Send("INTERACTION_CREATE", click("8832", approvalsCh, moderator, []string{modRole}, "al:x:"+recRef, "9100"))
	if got := h.followUp("8832"); got != bot.UserMessage(bot.ErrAlreadyExtended) {
		t.Fatalf("answer %q", got)
	}

	h.fd.Send("INTERACTION_CREATE", dmClickIn("8833", "3555", dmUser, "al:a:"+recRef, "9200"))
	waitRec(t, rb, "Decide", func(_ []bot.Click, _ []editCall, _, d []bot.Click) bool { return len(d) == 1 })
	if _, _, _, d := rb.get(); d[0].Message != "9200" || d[0].Channel != "3555" || d[0].User != dmUser || !d[0].Allow {
		t.Fatalf("DM click %+v", d[0])
	}
	if !bot.IsRefusal(bot.ErrAlreadyExtended) || !bot.IsRefusal(bot.ErrNotEditable) {
		t.Fatal("extend and edit refusals are not known refusals")
	}
}

// TestRouterLinkAndOpenDM: jump URLs name the server (from the channel
// cache or GET /channels/{id}; @me for a DM), the channel or thread, and
// a card's first message; OpenDM opens the DM with a user id at
// POST /users/@me/channels and refuses anything else.
func TestRouterLinkAndOpenDM(t *testing.T) {
	f := newFakeDiscord(t, false)
	a := nopAdapter(t, f)
	ctx := context.Background()
	thread := bot.Thread{Platform: Platform, Channel: channelID, Thread: threadCh}
	for _, tc := range []struct {
		th   bot.Thread
		ref  string
		want string
	}{
		{thread, "", "https://discord.com/channels/" + guildID + "/" + threadCh},
		{thread, "9101,9102", "https://discord.com/channels/" + guildID + "/" + threadCh + "/9101"},
		{bot.Thread{Platform: Platform, Channel: approvalsCh}, "9103", "https://discord.com/channels/" + guildID + "/" + approvalsCh + "/9103"},
		{bot.Thread{Platform: Platform, Channel: dmChannel}, "9104", "https://discord.com/channels/@me/" + dmChannel + "/9104"},
	} {
		got, err := a.Link(ctx, tc.th, tc.ref)
		if err != nil || got != tc.want {
			t.Errorf("Link(%+v, %q) = %q, %v; want %q", tc.th, tc.ref, got, err, tc.want)
		}
		if safeLink(got) != got {
			t.Errorf("the card renderer would drop %q", got)
		}
	}
	if n := len(f.Recorded("GET", "/channels/"+threadCh)); n != 1 {
		t.Errorf("%d lookups of the thread, want 1 (cached)", n)
	}
	for _, bad := range []struct {
		th  bot.Thread
		ref string
	}{{thread, "x"}, {thread, "<@1>"}, {bot.Thread{Platform: Platform, Channel: "nope"}, ""}, {bot.Thread{Platform: Platform, Channel: "3998"}, ""}} {
		if got, err := a.Link(ctx, bad.th, bad.ref); err == nil {
			t.Errorf("Link(%+v, %q) = %q", bad.th, bad.ref, got)
		}
	}

	dm, err := a.OpenDM(ctx, approver2)
	if err != nil {
		t.Fatal(err)
	}
	opened := f.Recorded("POST", "/users/@me/channels")
	if len(opened) != 1 || opened[0].JSON(t)["recipient_id"] != approver2 || dm != (bot.Thread{Platform: Platform, Channel: f.DMOf(approver2)}) {
		t.Fatalf("OpenDM = %+v; requests %+v", dm, opened)
	}
	// The DM's link needs no lookup: OpenDM cached it.
	if got, err := a.Link(ctx, dm, "9105"); err != nil || got != "https://discord.com/channels/@me/"+dm.Channel+"/9105" {
		t.Fatalf("DM link %q, %v", got, err)
	}
	if n := len(f.Recorded("GET", "/channels/"+dm.Channel)); n != 0 {
		t.Fatalf("%d lookups of the DM channel", n)
	}
	for _, bad := range []string{"", "<@&" + modRole + ">", "role:" + modRole, "@everyone", botID} {
		if th, err := a.OpenDM(ctx, bad); err == nil {
			t.Errorf("OpenDM(%q) = %+v", bad, th)
		}
	}
	if n := len(f.Recorded("POST", "/users/@me/channels")); n != 1 {
		t.Fatalf("%d DM opens, want 1", n)
	}
}

// TestPostCardAndPointer: a card routed to an approvals channel is a
// top-level message there, a DM copy a message in the DM; the pointer is
// a message in the thread without buttons, and is edited to the outcome;
// nothing pings.
func TestPostCardAndPointer(t *testing.T) {
	f := newFakeDiscord(t, false)
	a := nopAdapter(t, f)
	ctx := context.Background()
	cd := sampleCard()
	cd.Copy, cd.ThreadLink = card.CopyApprovals, JumpBase+guildID+"/"+threadCh
	cd.Calls[1].Editable = true
	cd.Calls[1].Edited = &card.Edit{By: moderator, Changes: []card.Change{{Key: "service", Before: `"api"`, After: `"<@` + moderator + `> @everyone"`}}}
	ref, err := a.PostCard(ctx, bot.Thread{Platform: Platform, Channel: approvalsCh}, cd)
	if err != nil || ref == "" {
		t.Fatal(ref, err)
	}
	posts := f.Recorded("POST", "/channels/"+approvalsCh+"/messages")
	if len(posts) != 1 || posts[0].ID() != ref {
		t.Fatalf("approvals channel posts: %d", len(posts))
	}
	dm, err := a.OpenDM(ctx, dmUser)
	if err != nil {
		t.Fatal(err)
	}
	cd.Copy = card.CopyDM
	if _, err := a.PostCard(ctx, dm, cd); err != nil {
		t.Fatal(err)
	}
	if n := len(f.Recorded("POST", "/channels/"+dm.Channel+"/messages")); n != 1 {
		t.Fatalf("DM copy posts: %d", n)
	}

	th := bot.Thread{Platform: Platform, Channel: channelID, Thread: threadCh}
	link, err := a.Link(ctx, bot.Thread{Platform: Platform, Channel: approvalsCh}, ref)
	if err != nil {
		t.Fatal(err)
	}
	p := card.Pointer{BatchID: cd.BatchID, Channel: approvalsCh, CardLink: link, Status: confirm.BatchPending, Calls: cd.Calls}
	pref, err := a.PostPointer(ctx, th, p)
	if err != nil {
		t.Fatal(err)
	}
	ptr := f.Recorded("POST", "/channels/"+threadCh+"/messages")
	if len(ptr) != 1 || ptr[0].ID() != pref {
		t.Fatalf("pointer posts: %d", len(ptr))
	}
	pm := decodeMessage(t, ptr[0])
	if pm.content != "⏳ Waiting for approval in <#"+approvalsCh+"> — [View the card](<"+link+">)" || len(pm.components) != 0 {
		t.Fatalf("pointer %q %v", pm.content, pm.components)
	}
	at := time.Date(2026, 11, 29, 16, 6, 0, 0, time.UTC)
	p.Calls = append([]card.Call(nil), cd.Calls...)
	p.Calls[1].State = card.State{Kind: card.Allowed, By: moderator, At: &at}
	p.Calls[2].State = card.State{Kind: card.Expired}
	if err := a.UpdatePointer(ctx, th, pref, p); err != nil {
		t.Fatal(err)
	}
	edits := f.Recorded("PATCH", "/channels/"+threadCh+"/messages/"+pref)
	if len(edits) != 1 {
		t.Fatalf("pointer edits: %d", len(edits))
	}
	em := decodeMessage(t, edits[0])
	if !strings.HasPrefix(em.content, "Approval request in <#"+approvalsCh+"> closed") || !strings.Contains(em.content, "allowed by <@"+moderator+">") ||
		!strings.Contains(em.content, "expired") || em.components == nil || len(em.components) != 0 {
		t.Fatalf("pointer edit %q %v", em.content, em.components)
	}
	if err := a.UpdatePointer(ctx, th, "9101,9102", p); err == nil {
		t.Fatal("a pointer reference of two messages accepted")
	}
	for _, c := range f.AllCalls() {
		if c.Method == "GET" || c.Path == "/users/@me/channels" {
			continue
		}
		if _, am := postedMentions(t, c); len(am.Parse)+len(am.Users)+len(am.Roles) != 0 {
			t.Fatalf("%s %s may ping: %+v", c.Method, c.Path, am)
		}
	}
}

// MemberRoles asks Discord for a person's roles in the server of a
// channel (the web console's decisions carry none): a moderator's are
// theirs, a stranger has none, a DM has none, and what is not a Discord
// id is not asked about.
func TestMemberRoles(t *testing.T) {
	f := newFakeDiscord(t, false)
	a := nopAdapter(t, f)
	ctx := context.Background()
	if roles, err := a.MemberRoles(ctx, channelID, moderator); err != nil || len(roles) != 1 || roles[0] != modRole {
		t.Fatalf("the moderator's roles: %v, %v", roles, err)
	}
	if roles, err := a.MemberRoles(ctx, channelID, stranger); err != nil || len(roles) != 0 {
		t.Fatalf("a stranger's roles: %v, %v", roles, err)
	}
	if roles, err := a.MemberRoles(ctx, dmChannel, moderator); err != nil || len(roles) != 0 {
		t.Fatalf("roles in a DM: %v, %v", roles, err)
	}
	asked := len(f.Recorded("GET", "/guilds/"+guildID+"/members/"+moderator))
	if roles, err := a.MemberRoles(ctx, channelID, "<@&"+modRole+">"); err != nil || len(roles) != 0 {
		t.Fatalf("a mention as a user: %v, %v", roles, err)
	}
	if n := len(f.Recorded("GET", "/guilds/"+guildID+"/members/"+moderator)); n != asked {
		t.Fatalf("Discord was asked about a mention")
	}
}
