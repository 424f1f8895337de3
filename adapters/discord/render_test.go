package discord

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
)

var update = flag.Bool("update", false, "rewrite golden files")

func golden(t *testing.T, name string, v any) {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	got := buf.Bytes()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

// rendered is what the golden files hold: one message of a card.
type rendered struct {
	Content    string                       `json:"content"`
	Embeds     []*discordgo.MessageEmbed    `json:"embeds"`
	Components []discordgo.MessageComponent `json:"components"`
}

func render(c card.Card) rendered {
	content, embeds, components := Render(c)
	return rendered{content, embeds, components}
}

// longCard is sampleCard with five calls more: posted as two messages.
func longCard() card.Card {
	c := sampleCard()
	for i := 3; i < 8; i++ {
		call := c.Calls[1]
		call.Ref, call.Number, call.Key = confirm.RefAt(c.BatchID, i, 0), i+1, fmt.Sprintf("c%d", i)
		c.Calls = append(c.Calls, call)
	}
	return c
}

func sampleCard() card.Card {
	created := time.Date(2026, 11, 29, 16, 5, 0, 0, time.UTC)
	toolFlag := []confirm.Reason{{Kind: confirm.ReasonToolFlag}}
	return card.Card{
		BatchID:     "abcdefghijklmnopqrstuvwxyz",
		Intro:       "I'll check the status, then restart the API.",
		RequestedBy: requester,
		Approvers:   confirm.Approvers{Users: []string{dmUser}, Roles: []string{modRole}},
		CreatedAt:   created,
		ExpiresAt:   created.Add(30 * time.Minute),
		Status:      confirm.BatchPending,
		Calls: []card.Call{
			{Ref: "abcdefghijklmnopqrstuvwxyz.0", Number: 1, Key: "#0", Tool: "service_status", Summary: "Read the status of api", Args: "{\n  \"service\": \"api\"\n}", Approvals: 1,
				State: card.State{Kind: card.AllowedByPolicy, At: &created}},
			{Ref: "abcdefghijklmnopqrstuvwxyz.1", Number: 2, Key: "c2", Tool: "restart_service", Summary: "Restart api in production", Args: "{\n  \"environment\": \"production\",\n  \"service\": \"api\"\n}",
				Flagged: true, Reasons: toolFlag, Approvals: 1, State: card.State{Kind: card.Waiting}},
			{Ref: "abcdefghijklmnopqrstuvwxyz.2", Number: 3, Key: "c3", Tool: "timeout_member", Summary: "Time out <@" + spammer + "> for 10 minutes. Reason: spam", Args: "{\n  \"duration\": \"10m\",\n  \"reason\": \"spam\",\n  \"user\": \"" + spammer + "\"\n}",
				Flagged: true, Reasons: toolFlag, Approvals: 1, State: card.State{Kind: card.Waiting}},
		},
	}
}

func TestRenderGolden(t *testing.T) {
	c := sampleCard()
	golden(t, "card_pending.json", render(c))

	at := time.Date(2026, 11, 29, 16, 6, 0, 0, time.UTC)
	c.Calls[1].State = card.State{Kind: card.Allowed, By: moderator, At: &at}
	golden(t, "card_partial.json", render(c))

	c.Calls[0].Run = confirm.RunSucceeded
	c.Calls[1].Run = confirm.RunSucceeded
	c.Calls[2].State = card.State{Kind: card.Denied, By: moderator, At: &at, Reason: "they apologised"}
	c.Status = confirm.BatchDone
	golden(t, "card_complete.json", render(c))

	golden(t, "reason_modal.json", ReasonModal(c.Calls[2].Ref, 3))

	// Tiers: critical and high said in words, in the warning colour while
	// open; low in words; medium (the default) says nothing.
	r := sampleCard()
	r.Calls[1].Risk, r.Calls[2].Risk = confirm.RiskCritical, confirm.RiskLow
	golden(t, "card_risk.json", render(r))

	// Two calls waiting: Allow all and Deny all on the card's own row.
	all := sampleCard()
	all.AllRef = "all-abcdefghijklmnopqrstuvwxyz.0"
	golden(t, "card_allow_all.json", render(all))
}

// TestAllowAndDenyByStyleAlone: only Allow is success, only Deny danger.
func TestAllowAndDenyByStyleAlone(t *testing.T) {
	c := sampleCard()
	_, _, components := Render(c)
	if len(components) != 2 {
		t.Fatalf("rows: %d, want one per gated open call", len(components))
	}
	for i, row := range components {
		ar := row.(discordgo.ActionsRow)
		ref := c.Calls[i+1].Ref
		for _, comp := range ar.Components {
			b := comp.(discordgo.Button)
			if len(b.CustomID) > 100 {
				t.Fatalf("custom_id %q", b.CustomID)
			}
			switch b.Style {
			case discordgo.SuccessButton:
				if b.CustomID != "al:a:"+ref || !strings.HasPrefix(b.Label, "Allow") {
					t.Fatalf("success button %+v", b)
				}
			case discordgo.DangerButton:
				if b.CustomID != "al:d:"+ref || !strings.HasPrefix(b.Label, "Deny") || strings.Contains(b.Label, "reason") {
					t.Fatalf("danger button %+v", b)
				}
			case discordgo.SecondaryButton:
				if b.CustomID != "al:r:"+ref {
					t.Fatalf("secondary button %+v", b)
				}
			default:
				t.Fatalf("style %d", b.Style)
			}
		}
	}
	one := c
	one.Calls = c.Calls[1:2]
	_, _, components = Render(one)
	labels := []string{}
	for _, comp := range components[0].(discordgo.ActionsRow).Components {
		labels = append(labels, comp.(discordgo.Button).Label)
	}
	if strings.Join(labels, "|") != "Allow|Deny|Deny with reason…" {
		t.Fatalf("single-call labels: %v", labels)
	}
	for _, id := range []string{"al:a:x.1", "al:d:x.1", "al:r:x.1", "al:m:x.1"} {
		if _, ref, ok := parseCustomID(id); !ok || ref != "x.1" {
			t.Fatalf("parse %q", id)
		}
	}
	for _, id := range []string{"", "al:", "al:a:", "al:Z:x.1", "x:a:x.1", "al:a:" + strings.Repeat("a", 100)} {
		if _, _, ok := parseCustomID(id); ok {
			t.Fatalf("parse %q accepted", id)
		}
	}
}

// TestRenderLimits: big calls stay within Discord's limits; calls split
// into messages of at most 10 embeds and 5 action rows, stably: with
// grants on and every call editable, a waiting call's six buttons take
// two rows (the decisions, then Edit… and Show full arguments), and the
// first message keeps a row for Extend.
func TestRenderLimits(t *testing.T) {
	c := sampleCard()
	c.Intro = strings.Repeat("words ", 1000)
	c.Calls = nil
	for i := range 13 {
		c.Calls = append(c.Calls, card.Call{
			Ref: fmt.Sprintf("abcdefghijklmnopqrstuvwxyz.%d", i), Number: i + 1, Key: fmt.Sprintf("#%d", i),
			Tool: "restart_service", Summary: strings.Repeat("Restart everything ", 300),
			Args:    "{\n  \"note\": \"" + strings.Repeat("x```y", 500) + "\"\n}",
			Flagged: i%2 == 0, Approvals: 1, Grantable: true, Editable: true, State: card.State{Kind: card.Waiting},
		})
		if !c.Calls[i].Flagged {
			c.Calls[i].State.Kind, c.Calls[i].Grantable, c.Calls[i].Editable = card.AllowedByPolicy, false, false
		}
	}
	c.GrantFor = time.Hour
	c.ExtendRef, c.ExtendBy = c.Calls[0].Ref, 30*time.Minute
	msgs := RenderMessages(c)
	// 7 gated calls, two rows each: 2 in the first message (with Extend),
	// then 2 a message.
	if len(msgs) != 4 {
		t.Fatalf("messages: %d, want 4", len(msgs))
	}
	calls := 0
	for i, m := range msgs {
		if runes(m.Content) > maxContent {
			t.Fatalf("message %d content %d characters", i, runes(m.Content))
		}
		if len(m.Embeds) > maxEmbeds || len(m.Components) > maxRows {
			t.Fatalf("message %d: %d embeds, %d rows", i, len(m.Embeds), len(m.Components))
		}
		checkRows(t, m.Components)
		// Allow, Allow for, Deny, Deny with reason | Edit…, Show full
		// arguments: two rows a call, never more than five buttons a row.
		for r, row := range m.Components {
			ar := row.(discordgo.ActionsRow)
			if i == 0 && r == len(m.Components)-1 {
				if b := ar.Components[0].(discordgo.Button); len(ar.Components) != 1 || b.Label != "Extend 30m" || b.CustomID != "al:x:"+c.Calls[0].Ref {
					t.Fatalf("the first message's last row is not Extend: %+v", ar)
				}
				continue
			}
			want := 4
			if r%2 == 1 {
				want = 2
			}
			if n := len(ar.Components); n != want {
				t.Fatalf("message %d row %d: %d buttons, want %d", i, r, n, want)
			}
		}
		total := 0
		for _, e := range m.Embeds {
			if runes(e.Title) > maxTitle || runes(e.Description) > maxDescription {
				t.Fatalf("embed title/description too long")
			}
			total += runes(e.Title) + runes(e.Description)
			for _, f := range e.Fields {
				if runes(f.Value) > maxFieldValue {
					t.Fatalf("field %q: %d characters", f.Name, runes(f.Value))
				}
				if f.Name == "Arguments" && (!strings.HasPrefix(f.Value, "```json\n") || strings.Count(f.Value, "```") != 2 || !strings.Contains(f.Value, "more characters hidden")) {
					t.Fatalf("arguments block broken or cut without saying so: %q", f.Value)
				}
				total += runes(f.Name) + runes(f.Value)
			}
			if e.Footer != nil {
				total += runes(e.Footer.Text)
			}
		}
		if total > maxEmbedsTotal {
			t.Fatalf("message %d: %d characters over its embeds", i, total)
		}
		calls += len(m.Embeds)
	}
	if calls != 13 || len(msgs[0].Components) != 5 || !strings.Contains(msgs[1].Content, "continued (message 2 of 4)") {
		t.Fatalf("split: %d calls, first message %d rows, second %q", calls, len(msgs[0].Components), msgs[1].Content)
	}
	// Deciding calls (and the bot dropping Editable and Grantable from
	// decided calls) never moves a call to another message.
	for i := range c.Calls {
		c.Calls[i].State = card.State{Kind: card.Denied, By: moderator}
		c.Calls[i].Editable, c.Calls[i].Grantable = false, false
	}
	c.ExtendRef = ""
	done := RenderMessages(c)
	if len(done) != len(msgs) || done[0].Components == nil {
		t.Fatalf("complete split differs or keeps buttons")
	}
	for i := range done {
		if len(done[i].Embeds) != len(msgs[i].Embeds) || len(done[i].Components) != 0 {
			t.Fatalf("message %d: %d embeds once decided, %d before; %d rows", i, len(done[i].Embeds), len(msgs[i].Embeds), len(done[i].Components))
		}
	}

	// Without grants a call's buttons fit one row: four calls and Extend
	// in the first message, five in the next.
	c = sampleCard()
	c.Calls = nil
	for i := range 9 {
		c.Calls = append(c.Calls, card.Call{Ref: confirm.Ref("abcdefghijklmnopqrstuvwxyz", i), Number: i + 1, Tool: "t", Args: "{}",
			Flagged: true, Approvals: 1, Editable: true, State: card.State{Kind: card.Waiting}})
	}
	c.ExtendRef, c.ExtendBy = c.Calls[0].Ref, time.Hour
	msgs = RenderMessages(c)
	if len(msgs) != 2 || len(msgs[0].Embeds) != 4 || len(msgs[0].Components) != 5 || len(msgs[1].Embeds) != 5 || len(msgs[1].Components) != 5 {
		t.Fatalf("split without grants: %d messages", len(msgs))
	}
	for _, m := range msgs {
		checkRows(t, m.Components)
	}
	if row := msgs[0].Components[0].(discordgo.ActionsRow); len(row.Components) != 4 || row.Components[3].(discordgo.Button).Label != "Edit [1]…" {
		t.Fatalf("first row: %+v", row)
	}
}

func TestSplitText(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{{"short", 1}, {strings.Repeat("x", 2000), 1}, {strings.Repeat("x", 2001), 2}, {strings.Repeat("é", 4500), 3}, {"", 1}} {
		parts := splitText(tc.in, maxContent)
		if len(parts) != tc.want {
			t.Errorf("%d characters: %d parts, want %d", runes(tc.in), len(parts), tc.want)
		}
		for _, p := range parts {
			if runes(p) > maxContent {
				t.Errorf("part of %d", runes(p))
			}
		}
	}
	if got := threadName("<@" + botID + ">   restart\tthe api\nplease"); got != "restart the api" {
		t.Errorf("thread name %q", got)
	}
	if got := threadName("<@" + botID + ">"); got != "Airlock" {
		t.Errorf("thread name %q", got)
	}
	if got := threadName(strings.Repeat("a", 150)); runes(got) != 100 {
		t.Errorf("thread name of %d", runes(got))
	}
}

// approver2 is a second approver, listed by user id, for quorum cards.
const approver2 = "2004"

// TestRenderQuorumGolden: a call needing two approvals, after the first:
// why it is asked, "1 of 2 approvals" naming the approver (a mention that
// cannot ping), and its buttons still there.
func TestRenderQuorumGolden(t *testing.T) {
	c := sampleCard()
	at := time.Date(2026, 11, 29, 16, 6, 0, 0, time.UTC)
	c.Calls[1].Approvals = 2
	c.Calls[1].Reasons = []confirm.Reason{{Kind: confirm.ReasonRule, Rule: "prod-restarts"}}
	c.Calls[1].Votes = []confirm.Vote{{By: moderator, At: at}}
	c.Calls[2].Restrict = []confirm.Approvers{{Roles: []string{modRole}}}
	golden(t, "card_quorum.json", render(c))

	_, embeds, components := Render(c)
	e := embedMap(t, embeds[1])
	if got := shown(field(e, flagReasonLabel)); got != "needs 2 approvals: rule prod-restarts" {
		t.Errorf("why: %q", got)
	}
	if got := field(e, statusLabel); got != "⏳ waiting for a decision: 1 of 2 approvals: <@"+moderator+">" {
		t.Errorf("status: %q", got)
	}
	if got := field(embedMap(t, embeds[2]), flagReasonLabel); !strings.Contains(got, "Who may decide: <@&"+modRole+">") {
		t.Errorf("restricted call: %q", got)
	}
	if len(components) != 2 {
		t.Fatalf("rows: %d, want both calls still open", len(components))
	}

	// Decided by both: both named, the last decision's time.
	at2 := at.Add(time.Minute)
	c.Calls[1].Votes = append(c.Calls[1].Votes, confirm.Vote{By: approver2, At: at2})
	c.Calls[1].State = card.State{Kind: card.Allowed, By: approver2, At: &at2}
	_, embeds, components = Render(c)
	if got := field(embedMap(t, embeds[1]), statusLabel); got != fmt.Sprintf("✅ allowed by <@%s> and <@%s> <t:%d:f>", moderator, approver2, at2.Unix()) {
		t.Errorf("decided quorum status: %q", got)
	}
	if len(components) != 1 {
		t.Errorf("rows: %d, want the open call's only", len(components))
	}
}

// TestRenderGrantGolden: with grants on, a grantable call offers "Allow
// for 1h" (secondary style, next to Allow, carrying the call's reference
// only); a call that may not be granted does not.
func TestRenderGrantGolden(t *testing.T) {
	c := sampleCard()
	c.GrantFor = time.Hour
	c.Calls[1].Grantable = true
	golden(t, "card_grant.json", render(c))

	_, _, components := Render(c)
	row := components[0].(discordgo.ActionsRow).Components
	labels := []string{}
	for _, comp := range row {
		labels = append(labels, comp.(discordgo.Button).Label)
	}
	if strings.Join(labels, "|") != "Allow [2]|Allow [2] for 1h|Deny [2]|Deny [2] with reason…" {
		t.Fatalf("labels: %v", labels)
	}
	if b := row[1].(discordgo.Button); b.Style != discordgo.SecondaryButton || b.CustomID != "al:g:"+c.Calls[1].Ref {
		t.Fatalf("grant button %+v", b)
	}
	for _, comp := range components[1].(discordgo.ActionsRow).Components {
		if strings.HasPrefix(comp.(discordgo.Button).CustomID, "al:g:") {
			t.Fatal("a call that may not be granted offers Allow for")
		}
	}
	one := c
	one.Calls = c.Calls[1:2]
	_, _, components = Render(one)
	if b := components[0].(discordgo.ActionsRow).Components[1].(discordgo.Button); b.Label != one.GrantLabel() || b.Label != "Allow for 1h" {
		t.Fatalf("single-call grant label %q", b.Label)
	}
	if _, ref, ok := parseCustomID("al:g:x.1"); !ok || ref != "x.1" {
		t.Fatal("al:g: not parsed")
	}
	if a, ref, ok := parseCustomID("al:v:grant-abc"); !ok || a != actionRevoke || ref != "grant-abc" {
		t.Fatal("al:v: not parsed")
	}
}

// TestRenderStatesGolden: every way a call ends, from the structured
// state: allowed by two people, by a grant, refused by a rule (with the
// rule's words), withdrawn with a reason, moved on, expired, invalid,
// not run, and an uncertain run.
func TestRenderStatesGolden(t *testing.T) {
	c := sampleCard()
	at := time.Date(2026, 11, 29, 16, 6, 0, 0, time.UTC)
	at2 := at.Add(time.Minute)
	base := c.Calls[1]
	call := func(i int, f func(*card.Call)) card.Call {
		cc := base
		cc.Ref, cc.Number, cc.Key = confirm.Ref(c.BatchID, i), i+1, fmt.Sprintf("c%d", i+1)
		f(&cc)
		return cc
	}
	c.Status = confirm.BatchDone
	c.Calls = []card.Call{
		call(0, func(cc *card.Call) {
			cc.Approvals, cc.Votes = 2, []confirm.Vote{{By: moderator, At: at}, {By: approver2, At: at2}}
			cc.State, cc.Run = card.State{Kind: card.Allowed, By: approver2, At: &at2}, confirm.RunSucceeded
		}),
		call(1, func(cc *card.Call) {
			cc.State, cc.Run = card.State{Kind: card.AllowedByGrant, At: &at, GrantID: "grantid234"}, confirm.RunSucceeded
		}),
		call(2, func(cc *card.Call) {
			cc.Flagged, cc.Reasons = false, []confirm.Reason{{Kind: confirm.ReasonRule, Rule: "no-prod-fridays"}}
			cc.State = card.State{Kind: card.DeniedByRule, At: &at, Rule: "no-prod-fridays", Message: "No production restarts on Fridays."}
		}),
		call(3, func(cc *card.Call) {
			cc.State = card.State{Kind: card.Withdrawn, By: requester, At: &at, Reason: "wrong service"}
		}),
		call(4, func(cc *card.Call) { cc.State = card.State{Kind: card.MovedOn, At: &at} }),
		call(5, func(cc *card.Call) { cc.State = card.State{Kind: card.Expired, At: &at} }),
		call(6, func(cc *card.Call) {
			cc.Flagged, cc.State = false, card.State{Kind: card.Invalid, At: &at, Message: "Not executed: /service: required"}
		}),
		call(7, func(cc *card.Call) {
			cc.Flagged, cc.State = false, card.State{Kind: card.NotRun, At: &at, Message: confirm.SiblingInvalidMessage}
		}),
		call(8, func(cc *card.Call) {
			cc.State, cc.Run = card.State{Kind: card.Allowed, By: moderator, At: &at}, confirm.RunUnknown
		}),
	}
	msgs := RenderMessages(c) // six gated calls: two messages
	golden(t, "card_states.json", msgs)
	var embeds []*discordgo.MessageEmbed
	for _, m := range msgs {
		if len(m.Components) != 0 {
			t.Fatalf("a complete card has buttons")
		}
		embeds = append(embeds, m.Embeds...)
	}
	if len(msgs) != 2 || len(embeds) != 9 {
		t.Fatalf("%d messages, %d embeds", len(msgs), len(embeds))
	}
	want := []string{
		"allowed by <@" + moderator + "> and <@" + approver2 + ">",
		"allowed by grant grantid234 <t:1795968360:f>; succeeded",
		"refused by rule no\\-prod\\-fridays; not run\nThe rule says: No production restarts on Fridays\\.",
		"withdrawn by the requester <@" + requester + ">",
		"not run: the requester moved on",
		"expired: nobody decided in time",
		`not run: Not executed\: \/service\: required`,
		"not run: Not run\\: another call",
		"**outcome unknown**",
	}
	for i, w := range want {
		if got := field(embedMap(t, embeds[i]), statusLabel); !strings.Contains(got, w) {
			t.Errorf("call %d status %q lacks %q", i+1, got, w)
		}
	}
	if got := field(embedMap(t, embeds[3]), statusLabel); !strings.HasSuffix(got, "\nReason: wrong service") {
		t.Errorf("withdrawn: %q", got)
	}
	// The rule's default words are not repeated.
	c.Calls[2].State.Message = confirm.DefaultRuleDenyMessage("no-prod-fridays")
	_, embeds, _ = Render(c)
	if got := field(embedMap(t, embeds[2]), statusLabel); strings.Contains(got, "\n") {
		t.Errorf("default rule message repeated: %q", got)
	}
}

// TestGrantNoticeGolden: a grant's notice names who granted which tool
// until when, pings nobody, and carries Revoke (danger style, the grant's
// reference only) while active; revoked or lapsed, it says so, without
// the button.
func TestGrantNoticeGolden(t *testing.T) {
	created := time.Date(2026, 11, 29, 16, 6, 0, 0, time.UTC)
	n := card.GrantNotice{Ref: confirm.GrantRef("grantid234"), GrantID: "grantid234", Tool: "restart_service", By: moderator, For: "444444444444444444", Until: created.Add(time.Hour)}
	active := RenderGrantNotice(n, created)
	golden(t, "grant_notice_active.json", active)
	if len(active.Components) != 1 {
		t.Fatalf("active notice rows: %d", len(active.Components))
	}
	row := active.Components[0].(discordgo.ActionsRow).Components
	if b := row[0].(discordgo.Button); len(row) != 1 || b.Style != discordgo.DangerButton || b.Label != RevokeLabel || b.CustomID != "al:v:grant-grantid234" {
		t.Fatalf("revoke button %+v", row)
	}
	if !strings.Contains(active.Content, "<@"+moderator+">") || !strings.Contains(active.Content, `restart\_service`) || !strings.Contains(active.Content, fmt.Sprintf("<t:%d:f>", n.Until.Unix())) {
		t.Fatalf("content %q", active.Content)
	}

	at := created.Add(10 * time.Minute)
	n.RevokedBy, n.RevokedAt = approver2, &at
	revoked := RenderGrantNotice(n, at)
	golden(t, "grant_notice_revoked.json", revoked)
	if len(revoked.Components) != 0 || revoked.Components == nil || !strings.Contains(revoked.Content, "**Revoked by** <@"+approver2+">") {
		t.Fatalf("revoked notice %+v", revoked)
	}

	n.RevokedBy, n.RevokedAt = "", nil
	if lapsed := RenderGrantNotice(n, n.Until); len(lapsed.Components) != 0 || !strings.Contains(lapsed.Content, "**Expired.** Later calls need a card again.") {
		t.Fatalf("lapsed notice %+v", lapsed)
	}

	// Hostile names stay inert.
	n.Tool, n.By, n.For = "x||@everyone <@1>", "<@&"+modRole+"> [x](http://evil)\u202e", "<@&"+modRole+">"
	for _, m := range []CardMessage{RenderGrantNotice(n, created), RenderGrantNotice(n, n.Until)} {
		if bad := liveMarkup(m.Content); len(bad) != 0 {
			t.Fatalf("live in the notice %q: %v", m.Content, bad)
		}
	}
}

// TestTruncateMarkup: a cut never leaves half a mention, timestamp,
// escape or bold span.
func TestTruncateMarkup(t *testing.T) {
	s := "allowed by <@12345678901234567890> and <@2003> <t:1795968360:f>; **outcome unknown**: check \\*it\\*"
	for n := 1; n <= runes(s)+1; n++ {
		got := truncateMarkup(s, n)
		if runes(got) > n {
			t.Fatalf("cut to %d: %d characters", n, runes(got))
		}
		if bad := liveMarkup(strings.NewReplacer("<@12345678901234567890>", "").Replace(got)); len(bad) != 0 {
			t.Fatalf("cut to %d: %q live: %v", n, got, bad)
		}
		if strings.HasSuffix(strings.TrimSuffix(got, "…"), "\\") && !strings.HasSuffix(strings.TrimSuffix(got, "…"), "\\\\") {
			t.Fatalf("cut to %d inside an escape: %q", n, got)
		}
	}
}

// A runbook step's card: Airlock's call, started by a person, with no
// words of the agent; names are shown inert.
func TestRenderRunbookStepGolden(t *testing.T) {
	c := sampleCard()
	c.Intro = ""
	c.Calls = c.Calls[1:2]
	c.Calls[0].Number = 1
	c.Step = &card.Step{Runbook: "restart", ID: "deploy_api", StartedBy: requester, Attempt: 2, Attempts: 5}
	golden(t, "card_runbook_step.json", render(c))
}
