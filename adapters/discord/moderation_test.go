package discord

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/adapters/internal/visible"
	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/tools"
)

func moderationSet(t *testing.T, f *fakeDiscord) map[string]tools.Tool {
	t.Helper()
	s, err := NewSession(Config{Token: testToken, APIURL: f.APIURL()})
	if err != nil {
		t.Fatal(err)
	}
	ts, err := ModerationTools(ModerationToolNames, s)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]tools.Tool{}
	for _, tool := range ts {
		if !tool.Confirm() {
			t.Fatalf("%s is not gated", tool.Spec().Name)
		}
		var schema map[string]any
		if err := json.Unmarshal(tool.Spec().Parameters, &schema); err != nil || schema["additionalProperties"] != false {
			t.Fatalf("%s schema: %v %v", tool.Spec().Name, schema, err)
		}
		out[tool.Spec().Name] = tool
	}
	if len(out) != 4 {
		t.Fatalf("tools: %v", out)
	}
	if err := addAll(ts); err != nil {
		t.Fatal(err)
	}
	return out
}

// addAll checks the tools fit in a tools.Set (valid, distinct names).
func addAll(ts []tools.Tool) error {
	set, err := tools.New(nil, tools.Options{})
	if err != nil {
		return err
	}
	for _, tool := range ts {
		if err := set.Add(tool); err != nil {
			return err
		}
	}
	return nil
}

func runCtx(decidedBy string) context.Context {
	return confirm.WithRunInfo(context.Background(), confirm.RunInfo{
		Platform: Platform, Channel: channelID, Thread: "3600", BatchID: "b", Key: "#0",
		RequestedBy: requester, DecidedBy: decidedBy,
	})
}

func auditReasonOf(t *testing.T, c apiCall) string {
	t.Helper()
	raw := c.Header.Get("X-Audit-Log-Reason")
	r, err := url.PathUnescape(raw)
	if err != nil {
		t.Fatalf("reason %q: %v", raw, err)
	}
	return r
}

func TestModerationToolsRun(t *testing.T) {
	f := newFakeDiscord(t, false)
	ts := moderationSet(t, f)
	ctx := runCtx(moderator)

	before := time.Now()
	out, err := ts[ToolTimeoutMember].Run(ctx, json.RawMessage(`{"user":"`+spammer+`","duration":"1h30m","reason":"flooding #général"}`), "b/#0")
	if err != nil {
		t.Fatal(err)
	}
	c := f.Recorded("PATCH", "/guilds/"+guildID+"/members/"+spammer)
	if len(c) != 1 || !strings.Contains(out, spammer) {
		t.Fatalf("timeout: %v %q", c, out)
	}
	if r := auditReasonOf(t, c[0]); r != "Approved by "+moderator+" via Airlock: flooding #général" {
		t.Fatalf("reason %q", r)
	}
	if raw := c[0].Header.Get("X-Audit-Log-Reason"); strings.ContainsAny(raw, " é#") {
		t.Fatalf("reason not URL-encoded: %q", raw)
	}
	until, _ := time.Parse(time.RFC3339, c[0].JSON(t)["communication_disabled_until"].(string))
	if d := until.Sub(before); d < 89*time.Minute || d > 91*time.Minute {
		t.Fatalf("until %v: %v from now", until, d)
	}

	if _, err := ts[ToolKickMember].Run(ctx, json.RawMessage(`{"user":"`+spammer+`","reason":"raid"}`), "b/#1"); err != nil {
		t.Fatal(err)
	}
	c = f.Recorded("DELETE", "/guilds/"+guildID+"/members/"+spammer)
	if len(c) != 1 || auditReasonOf(t, c[0]) != "Approved by "+moderator+" via Airlock: raid" {
		t.Fatalf("kick: %+v", c)
	}

	if _, err := ts[ToolBanMember].Run(ctx, json.RawMessage(`{"user":"`+spammer+`","reason":"raid","delete_message_days":2}`), "b/#2"); err != nil {
		t.Fatal(err)
	}
	c = f.Recorded("PUT", "/guilds/"+guildID+"/bans/"+spammer)
	if len(c) != 1 || c[0].JSON(t)["delete_message_seconds"] != float64(2*86400) || c[0].Query != "" || auditReasonOf(t, c[0]) != "Approved by "+moderator+" via Airlock: raid" {
		t.Fatalf("ban: %+v", c)
	}

	if _, err := ts[ToolDeleteMessage].Run(ctx, json.RawMessage(`{"channel":"`+channelID+`","message":"6001"}`), "b/#3"); err != nil {
		t.Fatal(err)
	}
	c = f.Recorded("DELETE", "/channels/"+channelID+"/messages/6001")
	if len(c) != 1 || auditReasonOf(t, c[0]) != "Approved by "+moderator+" via Airlock" {
		t.Fatalf("delete: %+v", c)
	}

	// A message of another server is not touched.
	if _, err := ts[ToolDeleteMessage].Run(ctx, json.RawMessage(`{"channel":"`+otherCh+`","message":"6002"}`), "b/#4"); err == nil {
		t.Fatal("deleted a message of another server")
	}
	if c := f.Recorded("DELETE", "/channels/"+otherCh+"/messages/6002"); len(c) != 0 {
		t.Fatal("DELETE sent for another server's message")
	}
	// Outside a Discord server conversation nothing is sent.
	n := len(f.AllCalls())
	for _, ctx := range []context.Context{
		context.Background(),
		confirm.WithRunInfo(context.Background(), confirm.RunInfo{Platform: "slack", Channel: channelID}),
		confirm.WithRunInfo(context.Background(), confirm.RunInfo{Platform: Platform, Channel: dmChannel, DecidedBy: moderator}),
	} {
		if _, err := ts[ToolKickMember].Run(ctx, json.RawMessage(`{"user":"`+spammer+`","reason":"x"}`), "k"); err == nil {
			t.Fatal("kick ran outside a server conversation")
		}
	}
	for _, c := range f.AllCalls()[n:] {
		if c.Method != "GET" {
			t.Fatalf("sent %s %s outside a server conversation", c.Method, c.Path)
		}
	}
	// Allowed by policy (confirmation turned off): the reason says so.
	if _, err := ts[ToolKickMember].Run(runCtx(bot.PolicyActor), json.RawMessage(`{"user":"2778","reason":"x"}`), "k2"); err != nil {
		t.Fatal(err)
	}
	c = f.Recorded("DELETE", "/guilds/"+guildID+"/members/2778")
	if len(c) != 1 || auditReasonOf(t, c[0]) != "Allowed by policy via Airlock: x" {
		t.Fatalf("policy kick: %+v", c)
	}
	// Allowed by a grant: the reason names the grant.
	if _, err := ts[ToolKickMember].Run(runCtx("grant:abc234"), json.RawMessage(`{"user":"2779","reason":"y"}`), "k3"); err != nil {
		t.Fatal(err)
	}
	c = f.Recorded("DELETE", "/guilds/"+guildID+"/members/2779")
	if len(c) != 1 || auditReasonOf(t, c[0]) != "Allowed by grant abc234 via Airlock: y" {
		t.Fatalf("granted kick: %+v", c)
	}
}

func TestModerationValidationAndReadBacks(t *testing.T) {
	f := newFakeDiscord(t, false)
	ts := moderationSet(t, f)
	good := map[string]struct{ args, summary string }{
		ToolTimeoutMember: {`{"user":"2777","duration":"2d3h","reason":"spam"}`, "Time out <@2777> for 2 days 3 hours. Reason: spam"},
		ToolKickMember:    {`{"user":"2777","reason":"raid\nagain"}`, "Kick <@2777> from the server. Reason: raid again"},
		ToolBanMember:     {`{"user":"2777","reason":"raid"}`, "Ban <@2777> from the server; their messages stay. Reason: raid"},
		ToolDeleteMessage: {`{"channel":"3001","message":"6001"}`, "Delete message 6001 in <#3001>"},
	}
	for name, g := range good {
		got, err := ts[name].Summary(json.RawMessage(g.args))
		if err != nil || got != g.summary {
			t.Errorf("%s summary %q, %v; want %q", name, got, err, g.summary)
		}
	}
	if got, _ := ts[ToolBanMember].Summary(json.RawMessage(`{"user":"2777","reason":"raid","delete_message_days":7}`)); got != "Ban <@2777> from the server and delete their messages of the last 7 days. Reason: raid" {
		t.Errorf("ban summary %q", got)
	}
	if got, _ := ts[ToolTimeoutMember].Summary(json.RawMessage(`{"user":"2777","duration":"4w","reason":"x"}`)); got != "Time out <@2777> for 28 days. Reason: x" {
		t.Errorf("timeout summary %q", got)
	}
	bad := []struct{ tool, args string }{
		{ToolTimeoutMember, `{"user":"2777","duration":"29d","reason":"x"}`},
		{ToolTimeoutMember, `{"user":"2777","duration":"0s","reason":"x"}`},
		{ToolTimeoutMember, `{"user":"2777","duration":"10 minutes","reason":"x"}`},
		{ToolTimeoutMember, `{"user":"2777","duration":"-5m","reason":"x"}`},
		{ToolTimeoutMember, `{"user":"2777","duration":"99999999999999999999h","reason":"x"}`},
		{ToolTimeoutMember, `{"user":"2777","reason":"x"}`},
		{ToolTimeoutMember, `{"user":2777,"duration":"1m","reason":"x"}`},
		{ToolTimeoutMember, `{"user":"<@2777>","duration":"1m","reason":"x"}`},
		{ToolTimeoutMember, `{"user":"2777","duration":"1m","reason":"x","extra":1}`},
		{ToolKickMember, `{"user":"2777","reason":"  "}`},
		{ToolKickMember, `{"user":"2777","reason":"` + strings.Repeat("x", 401) + `"}`},
		{ToolKickMember, `{"user":"2777","reason":"a\u0000b"}`},
		{ToolKickMember, `{"user":"2777","reason":"spam\u202e"}`},
		{ToolKickMember, `{"user":"2777","reason":"sp\u200bam"}`},
		{ToolKickMember, "{\"user\":\"2777\",\"reason\":\"\x1b[2Jspam\"}"},
		{ToolKickMember, `{"user":"123456789012345678901","reason":"x"}`},
		{ToolKickMember, `[]`},
		{ToolKickMember, `not json`},
		{ToolBanMember, `{"user":"2777","reason":"x","delete_message_days":8}`},
		{ToolBanMember, `{"user":"2777","reason":"x","delete_message_days":1.5}`},
		{ToolBanMember, `{"user":"2777","reason":"x","delete_message_days":"2"}`},
		{ToolDeleteMessage, `{"channel":"3001"}`},
		{ToolDeleteMessage, `{"channel":"abc","message":"1"}`},
	}
	for _, b := range bad {
		err := ts[b.tool].Validate(json.RawMessage(b.args))
		if err == nil || !errors.Is(err, tools.ErrInvalidArgs) {
			t.Errorf("%s %s: %v", b.tool, b.args, err)
		}
		if _, err := ts[b.tool].Run(runCtx(moderator), json.RawMessage(b.args), "k"); err == nil {
			t.Errorf("%s ran with %s", b.tool, b.args)
		}
	}
	if n := len(f.AllCalls()); n != 0 {
		t.Fatalf("invalid arguments reached the API: %d calls", n)
	}
	if _, err := ModerationTools([]string{"purge_everything"}, nil); err == nil {
		t.Fatal("nil session accepted")
	}
	s, _ := NewSession(Config{Token: testToken})
	if _, err := ModerationTools([]string{"purge_everything"}, s); err == nil {
		t.Fatal("unknown tool accepted")
	}
	if _, err := ModerationTools([]string{ToolBanMember, ToolBanMember}, s); err == nil {
		t.Fatal("a tool named twice accepted")
	}
}

func TestInviteURL(t *testing.T) {
	// View Channels 1<<10, Send Messages 1<<11, Embed Links 1<<14, Read
	// Message History 1<<16, Create Public Threads 1<<35, Send Messages in
	// Threads 1<<38.
	const base = 1024 + 2048 + 16384 + 65536 + 34359738368 + 274877906944
	if base != 309237730304 || BasePermissions != base {
		t.Fatalf("base permissions %d", BasePermissions)
	}
	got, err := InviteURL(testToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := "https://discord.com/oauth2/authorize?client_id=" + botID + "&scope=bot&permissions=309237730304"; got != want {
		t.Fatalf("invite %q, want %q", got, want)
	}
	// + Moderate Members 1<<40, Kick 1<<1, Ban 1<<2, Manage Messages 1<<13.
	got, err = InviteURL(testToken, ModerationToolNames)
	if err != nil {
		t.Fatal(err)
	}
	if want := "https://discord.com/oauth2/authorize?client_id=" + botID + "&scope=bot&permissions=1408749366278"; got != want {
		t.Fatalf("invite %q, want %q", got, want)
	}
	if p, _ := Permissions([]string{ToolTimeoutMember}); p != 309237730304+1099511627776 {
		t.Fatalf("timeout permissions %d", p)
	}
	if p, _ := Permissions([]string{ToolDeleteMessage}); p != 309237730304+8192 {
		t.Fatalf("delete permissions %d", p)
	}
	if _, err := InviteURL(testToken, []string{"nuke"}); err == nil {
		t.Fatal("unknown tool accepted")
	}
	for _, bad := range []string{"", "nodots", "!!!.x.y", "aGVsbG8.x.y"} {
		_, err := InviteURL(bad, nil)
		if err == nil {
			t.Fatalf("token %q accepted", bad)
		}
		if bad != "" && strings.Contains(err.Error(), bad) {
			t.Fatalf("the error shows the token: %v", err)
		}
	}
}

// FuzzModerationArgs: whatever arguments the model sends, parsing never
// panics, and what it accepts is bounded: snowflake ids, a duration of
// 1s to 28 days, 0 to 7 days of messages, a reason of 1 to 400
// characters with nothing hidden in it; the read-back and the audit log
// reason follow.
func FuzzModerationArgs(f *testing.F) {
	for _, a := range []string{
		`{"user":"2777","duration":"2d3h","reason":"spam"}`,
		`{"user":"2777","reason":"raid","delete_message_days":7}`,
		`{"channel":"3001","message":"6001"}`,
		`{"user":"2777","duration":"99999999999999999999h","reason":"x"}`,
		`{"user":"2777","reason":"x\u202e","delete_message_days":1e400}`,
		`{"user":"18446744073709551616","reason":"x"}`,
		`{"user":"2777","reason":"x","user":"1"}`,
		`null`, `[]`, ``, `{`,
	} {
		for _, name := range ModerationToolNames {
			f.Add(name, a)
		}
	}
	f.Fuzz(func(t *testing.T, name, raw string) {
		if !knownModerationTool(name) {
			return
		}
		tool := &moderationTool{name: name, now: time.Now}
		a, err := tool.parse(json.RawMessage(raw))
		if err != nil {
			if !errors.Is(err, tools.ErrInvalidArgs) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		fields := moderationFields[name]
		if _, ok := fields["user"]; ok && !isSnowflake(a.User) {
			t.Fatalf("user %q accepted", a.User)
		}
		if _, ok := fields["channel"]; ok && (!isSnowflake(a.Channel) || !isSnowflake(a.Message)) {
			t.Fatalf("channel %q message %q accepted", a.Channel, a.Message)
		}
		if _, ok := fields["duration"]; ok && (a.Duration < time.Second || a.Duration > MaxTimeout) {
			t.Fatalf("duration %v accepted", a.Duration)
		}
		if a.Days < 0 || a.Days > 7 {
			t.Fatalf("days %d accepted", a.Days)
		}
		if _, ok := fields["reason"]; ok {
			if a.Reason == "" || runes(a.Reason) > MaxModerationReason || visible.Contains(a.Reason) {
				t.Fatalf("reason %q accepted", a.Reason)
			}
		}
		summary, err := tool.Summary(json.RawMessage(raw))
		if err != nil || summary == "" || visible.Contains(summary) {
			t.Fatalf("summary %q, %v", summary, err)
		}
		reason, err := url.PathUnescape(auditReason(moderator, a.Reason))
		if err != nil || runes(reason) > maxAuditReason || strings.ContainsAny(reason, "\r\n") {
			t.Fatalf("audit reason %q, %v", reason, err)
		}
	})
}

// TestInvite: the client id is the application id Discord gives at
// GET {api_url}oauth2/applications/@me, not the token's first segment.
func TestInvite(t *testing.T) {
	f := newFakeDiscord(t, false)
	ctx := context.Background()
	got, err := Invite(ctx, Config{Token: testToken, APIURL: f.APIURL()}, ModerationToolNames)
	if err != nil {
		t.Fatal(err)
	}
	if want := "https://discord.com/oauth2/authorize?client_id=" + appID + "&scope=bot&permissions=1408749366278"; got != want {
		t.Fatalf("invite %q, want %q", got, want)
	}
	calls := f.Recorded("GET", "/oauth2/applications/@me")
	if len(calls) != 1 || calls[0].Header.Get("Authorization") != "Bot "+testToken {
		t.Fatalf("application lookup: %+v", calls)
	}
	if got, err := Invite(ctx, Config{Token: testToken, APIURL: f.APIURL()}, nil); err != nil || !strings.HasSuffix(got, "&permissions=309237730304") {
		t.Fatalf("base invite %q, %v", got, err)
	}
	// An unknown tool is refused before Discord is asked.
	n := len(f.AllCalls())
	if _, err := Invite(ctx, Config{Token: testToken, APIURL: f.APIURL()}, []string{"nuke"}); err == nil {
		t.Fatal("unknown tool accepted")
	}
	if len(f.AllCalls()) != n {
		t.Fatal("asked Discord for an invite with an unknown tool")
	}
	// A token Discord refuses: a clear error without the token.
	const bad = "MTIzNDU2Nzg5MDEyMzQ1Njc4.GhIjKl.wrong-secret-part"
	_, err = Invite(ctx, Config{Token: bad, APIURL: f.APIURL()}, nil)
	if err == nil || !strings.Contains(err.Error(), "discord.token") || strings.Contains(err.Error(), "wrong-secret-part") {
		t.Fatalf("refused token: %v", err)
	}
	// Nothing listening at api_url: an error, no URL made up from the token.
	dead := newFakeDiscord(t, false)
	dead.Close()
	if u, err := Invite(ctx, Config{Token: testToken, APIURL: dead.APIURL()}, nil); err == nil {
		t.Fatalf("invite %q without Discord", u)
	}
	if _, err := Invite(ctx, Config{Token: "", APIURL: f.APIURL()}, nil); err == nil {
		t.Fatal("empty token accepted")
	}
}
