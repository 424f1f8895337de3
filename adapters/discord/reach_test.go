package discord

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/tools"
)

// hierarchyMessage is what the model reads when Airlock's role is below
// the member's.
func hierarchyMessage(user, verb string) string {
	return "Airlock's role is below <@" + user + ">'s highest role, so it cannot " + verb + " them; move Airlock's role above theirs in Server Settings → Roles"
}

// TestModerationRefusedBeforeTheCard is the whole flow with the gateway:
// roles and the owner come from GUILD_CREATE (no GET /guilds/{id}), the
// members from REST. Calls Discord would refuse (a member above the bot,
// the owner, a non-member, the bot's peer) post no card: the model gets
// why. A lower member gets the card as before. Once Airlock's role is
// moved up (GUILD_ROLE_UPDATE), the same call gets its card.
func TestModerationRefusedBeforeTheCard(t *testing.T) {
	h := newHarness(t)
	mods, err := ModerationTools(ModerationToolNames, h.a.Session())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mods {
		if err := h.set.Add(m); err != nil {
			t.Fatal(err)
		}
	}
	h.model.PushCalls(
		tc("c1", ToolKickMember, `{"user":"`+adminUser+`","reason":"raid"}`),
		tc("c2", ToolBanMember, `{"user":"`+ownerUser+`","reason":"raid"}`),
		tc("c3", ToolTimeoutMember, `{"user":"`+stranger+`","duration":"1h","reason":"raid"}`),
		tc("c4", ToolKickMember, `{"user":"`+peerUser+`","reason":"raid"}`),
	)
	h.model.PushText("None of those can run.")
	h.model.PushCalls(tc("c5", ToolKickMember, `{"user":"`+spammer+`","reason":"raid"}`))
	h.model.PushText("Kicked.")
	h.model.PushCalls(tc("c6", ToolKickMember, `{"user":"`+adminUser+`","reason":"raid"}`))
	h.start()
	h.fd.Send("GUILD_CREATE", guildObject(5))
	h.waitGuildRole(guildID, "", -1) // the server is in the session's state

	h.fd.Send("MESSAGE_CREATE", guildMessage("7701", channelID, requester, mentionText("kick the raiders"), true))
	thread := h.threadFor("7701")
	h.waitAnswer(thread, "None of those can run.")
	if n := h.cards(thread); n != 0 {
		t.Fatalf("%d cards for calls that cannot run", n)
	}
	results := toolResults(t, h.lastRequest())
	want := []string{
		hierarchyMessage(adminUser, "kick"),
		"<@" + ownerUser + "> owns this server, and Discord lets nobody ban the owner",
		"<@" + stranger + "> is not a member of this server, so there is nobody to time out",
		"Airlock's role is not above <@" + peerUser + ">'s highest role (they hold the same role), so it cannot kick them; move Airlock's role above theirs in Server Settings → Roles",
	}
	if len(results) != len(want) {
		t.Fatalf("results %+v", results)
	}
	for i, r := range results {
		if !r.IsError || !strings.Contains(r.Content, want[i]) {
			t.Errorf("result %d: %q, want it to say %q", i, r.Content, want[i])
		}
	}
	if n := len(h.fd.Recorded("GET", "/guilds/"+guildID)); n != 0 {
		t.Errorf("%d GET /guilds/%s despite GUILD_CREATE", n, guildID)
	}
	if len(h.fd.Recorded("GET", "/guilds/"+guildID+"/members/"+adminUser)) == 0 || len(h.fd.Recorded("GET", "/guilds/"+guildID+"/members/"+botID)) == 0 {
		t.Error("the members were not looked up")
	}
	for _, m := range []string{"DELETE", "PUT", "PATCH"} {
		if c := h.fd.Recorded(m, "/guilds/*"); len(c) != 0 {
			t.Fatalf("moderation sent: %+v", c)
		}
	}

	// A member below the bot: the card, as before.
	h.fd.Send("MESSAGE_CREATE", guildMessage("7702", thread, requester, mentionText("then the spammer"), true))
	card := h.card(thread, 1)
	allow, _, _ := buttonIDs(t, card.components)
	h.fd.Send("INTERACTION_CREATE", click("8701", thread, moderator, []string{modRole}, allow[0], card.id))
	h.waitAnswer(thread, "Kicked.")
	if n := len(h.fd.Recorded("DELETE", "/guilds/"+guildID+"/members/"+spammer)); n != 1 {
		t.Fatalf("kicks: %d", n)
	}

	// Airlock's role moved above Admins: the call gets its card.
	role := guildRoles(11)[4].(map[string]any)
	h.fd.Send("GUILD_ROLE_UPDATE", map[string]any{"guild_id": guildID, "role": role})
	h.waitGuildRole(guildID, role["id"].(string), int(role["position"].(int)))
	h.fd.Send("MESSAGE_CREATE", guildMessage("7703", thread, requester, mentionText("now the admin"), true))
	card = h.card(thread, 2)
	if d := card.embeds[0]["description"].(string); !strings.Contains(shown(d), "Kick <@"+adminUser+">") {
		t.Fatalf("card: %v", d)
	}
}

// TestModerationValidateContext: with the conversation in the context,
// only its server counts, and what the gateway has not told comes from
// REST (GET /channels/{id}, /guilds/{id}, /guilds/{id}/members/{user}).
func TestModerationValidateContext(t *testing.T) {
	f := newFakeDiscord(t, false)
	ts := moderationSet(t, f)
	type contextValidator interface {
		ValidateContext(context.Context, json.RawMessage) error
	}
	ctx := runCtx("")
	for _, c := range []struct {
		tool, args, want string
	}{
		{ToolKickMember, `{"user":"` + adminUser + `","reason":"x"}`, hierarchyMessage(adminUser, "kick")},
		{ToolBanMember, `{"user":"` + adminUser + `","reason":"x"}`, hierarchyMessage(adminUser, "ban")},
		{ToolTimeoutMember, `{"user":"` + adminUser + `","duration":"1m","reason":"x"}`, hierarchyMessage(adminUser, "time out")},
		{ToolTimeoutMember, `{"user":"` + opsAdmin + `","duration":"1m","reason":"x"}`, "<@" + opsAdmin + "> has the Administrator permission, and Discord lets nobody time out an administrator"},
		{ToolKickMember, `{"user":"` + ownerUser + `","reason":"x"}`, "owns this server"},
		{ToolKickMember, `{"user":"` + stranger + `","reason":"x"}`, "is not a member of this server"},
		{ToolKickMember, `{"user":"` + opsAdmin + `","reason":"x"}`, ""},
		{ToolKickMember, `{"user":"` + spammer + `","reason":"x"}`, ""},
		{ToolTimeoutMember, `{"user":"` + spammer + `","duration":"1m","reason":"x"}`, ""},
		{ToolBanMember, `{"user":"` + stranger + `","reason":"x"}`, ""}, // banned by id
		{ToolDeleteMessage, `{"channel":"` + channelID + `","message":"6001"}`, ""},
	} {
		err := ts[c.tool].(contextValidator).ValidateContext(ctx, json.RawMessage(c.args))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s %s: %v", c.tool, c.args, err)
		case c.want != "" && (err == nil || !errors.Is(err, tools.ErrInvalidArgs) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s %s: %v, want %q", c.tool, c.args, err, c.want)
		}
	}
	if len(f.Recorded("GET", "/guilds/"+guildID)) == 0 {
		t.Error("no GET /guilds/{id} without the gateway")
	}
	// Not a server conversation: nothing can run.
	kick := json.RawMessage(`{"user":"` + spammer + `","reason":"x"}`)
	for _, info := range []confirm.RunInfo{
		{Platform: Platform, Channel: dmChannel},
		{Platform: "slack", Channel: "C0OPS"},
	} {
		if err := ts[ToolKickMember].(contextValidator).ValidateContext(confirm.WithRunInfo(context.Background(), info), kick); !errors.Is(err, tools.ErrInvalidArgs) {
			t.Errorf("%+v: %v", info, err)
		}
	}
	// What cannot be learnt lets the call through (Discord decides at run).
	for _, info := range []confirm.RunInfo{
		{Platform: Platform, Channel: "3998"},  // unknown channel
		{Platform: Platform, Channel: otherCh}, // another server, unknown to the fake
	} {
		if err := ts[ToolKickMember].(contextValidator).ValidateContext(confirm.WithRunInfo(context.Background(), info), kick); err != nil {
			t.Errorf("%+v: %v", info, err)
		}
	}
	// Arguments first, without a request.
	n := len(f.AllCalls())
	if err := ts[ToolKickMember].(contextValidator).ValidateContext(ctx, json.RawMessage(`{"user":"x"}`)); !errors.Is(err, tools.ErrInvalidArgs) {
		t.Errorf("bad arguments: %v", err)
	}
	if len(f.AllCalls()) != n {
		t.Error("bad arguments reached the API")
	}
	// Without the conversation and without the gateway, the bot's servers
	// are unknown: nothing is refused, nothing asked.
	if err := ts[ToolKickMember].Validate(json.RawMessage(`{"user":"` + adminUser + `","reason":"x"}`)); err != nil || len(f.AllCalls()) != n {
		t.Errorf("Validate without servers: %v, %d requests", err, len(f.AllCalls())-n)
	}
}

// TestModerationValidateFromREST: the gateway named the server (READY)
// but sent no GUILD_CREATE: roles and owner come from GET /guilds/{id}.
func TestModerationValidateFromREST(t *testing.T) {
	h := newHarness(t)
	mods, err := ModerationTools([]string{ToolKickMember}, h.a.Session())
	if err != nil {
		t.Fatal(err)
	}
	h.start()
	st := h.a.Session().State
	deadline := time.Now().Add(10 * time.Second)
	for {
		st.RLock()
		n := len(st.Guilds)
		st.RUnlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no READY")
		}
		time.Sleep(5 * time.Millisecond)
	}
	err = mods[0].Validate(json.RawMessage(`{"user":"` + adminUser + `","reason":"x"}`))
	if err == nil || !strings.Contains(err.Error(), hierarchyMessage(adminUser, "kick")) {
		t.Fatalf("Validate: %v", err)
	}
	if len(h.fd.Recorded("GET", "/guilds/"+guildID)) != 1 {
		t.Fatal("roles not read from REST")
	}
	if err := mods[0].Validate(json.RawMessage(`{"user":"` + spammer + `","reason":"x"}`)); err != nil {
		t.Fatalf("Validate: %v", err)
	}
}

// waitGuildRole waits until the session's state holds the server, with
// its owner and roles, and (with roleID) that role at position: the
// gateway's events are applied in order, but the test must not send the
// next one's consequences before it can tell.
func (h *harness) waitGuildRole(guild, roleID string, position int) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	held := func() bool {
		st := h.a.Session().State
		st.RLock()
		defer st.RUnlock()
		for _, g := range st.Guilds {
			if g == nil || g.ID != guild || g.OwnerID == "" || len(g.Roles) == 0 {
				continue
			}
			if roleID == "" {
				return true
			}
			for _, r := range g.Roles {
				if r != nil && r.ID == roleID && r.Position == position {
					return true
				}
			}
		}
		return false
	}
	for !held() {
		if time.Now().After(deadline) {
			h.t.Fatalf("the session's state never held server %s (role %q at %d)", guild, roleID, position)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
