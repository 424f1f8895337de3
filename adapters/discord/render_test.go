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

	"github.com/airlockhq/airlock/bot"
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

func render(c bot.Card) rendered {
	content, embeds, components := Render(c)
	return rendered{content, embeds, components}
}

func sampleCard() bot.Card {
	created := time.Date(2026, 11, 29, 16, 5, 0, 0, time.UTC)
	return bot.Card{
		BatchID:     "abcdefghijklmnopqrstuvwxyz",
		Intro:       "I'll check the status, then restart the API.",
		RequestedBy: requester,
		Approvers:   bot.ApproverSet{Users: []string{dmUser}, Roles: []string{modRole}},
		CreatedAt:   created,
		ExpiresAt:   created.Add(30 * time.Minute),
		Status:      confirm.BatchPending,
		Calls: []bot.CardCall{
			{Ref: "abcdefghijklmnopqrstuvwxyz.0", Number: 1, Key: "#0", Tool: "service_status", Summary: "Read the status of api", Args: "{\n  \"service\": \"api\"\n}", Decision: confirm.DecisionAllowedByPolicy, DecidedBy: bot.PolicyActor, DecidedAt: &created},
			{Ref: "abcdefghijklmnopqrstuvwxyz.1", Number: 2, Key: "c2", Tool: "restart_service", Summary: "Restart api in production", Args: "{\n  \"environment\": \"production\",\n  \"service\": \"api\"\n}", Flagged: true, Decision: confirm.DecisionPending},
			{Ref: "abcdefghijklmnopqrstuvwxyz.2", Number: 3, Key: "c3", Tool: "timeout_member", Summary: "Time out <@" + spammer + "> for 10 minutes. Reason: spam", Args: "{\n  \"duration\": \"10m\",\n  \"reason\": \"spam\",\n  \"user\": \"" + spammer + "\"\n}", Flagged: true, Decision: confirm.DecisionPending},
		},
	}
}

func TestRenderGolden(t *testing.T) {
	c := sampleCard()
	golden(t, "card_pending.json", render(c))

	at := time.Date(2026, 11, 29, 16, 6, 0, 0, time.UTC)
	c.Calls[1].Decision, c.Calls[1].DecidedBy, c.Calls[1].DecidedAt = confirm.DecisionAllowed, moderator, &at
	golden(t, "card_partial.json", render(c))

	c.Calls[0].Run = confirm.RunSucceeded
	c.Calls[1].Run = confirm.RunSucceeded
	c.Calls[2].Decision, c.Calls[2].DecidedBy, c.Calls[2].DecidedAt = confirm.DecisionDenied, moderator, &at
	c.Calls[2].DenyMessage = confirm.DefaultDenyMessage + ` Reason given by the approver (` + moderator + `): "they apologised"`
	c.Status = confirm.BatchDone
	golden(t, "card_complete.json", render(c))

	golden(t, "reason_modal.json", ReasonModal(c.Calls[2].Ref, 3))
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
	for _, id := range []string{"", "al:", "al:a:", "al:z:x.1", "x:a:x.1", "al:a:" + strings.Repeat("a", 100)} {
		if _, _, ok := parseCustomID(id); ok {
			t.Fatalf("parse %q accepted", id)
		}
	}
}

// TestRenderLimits: big calls stay within Discord's limits; more than 10
// calls or 5 gated calls split into several messages, stably.
func TestRenderLimits(t *testing.T) {
	c := sampleCard()
	c.Intro = strings.Repeat("words ", 1000)
	c.Calls = nil
	for i := range 13 {
		c.Calls = append(c.Calls, bot.CardCall{
			Ref: fmt.Sprintf("abcdefghijklmnopqrstuvwxyz.%d", i), Number: i + 1, Key: fmt.Sprintf("#%d", i),
			Tool: "restart_service", Summary: strings.Repeat("Restart everything ", 300),
			Args:    "{\n  \"note\": \"" + strings.Repeat("x```y", 500) + "\"\n}",
			Flagged: i%2 == 0, Decision: confirm.DecisionPending,
		})
		if !c.Calls[i].Flagged {
			c.Calls[i].Decision = confirm.DecisionAllowedByPolicy
		}
	}
	msgs := RenderMessages(c)
	if len(msgs) != 2 {
		t.Fatalf("messages: %d, want 2", len(msgs))
	}
	calls := 0
	for i, m := range msgs {
		if runes(m.Content) > maxContent {
			t.Fatalf("message %d content %d characters", i, runes(m.Content))
		}
		if len(m.Embeds) > maxEmbeds || len(m.Components) > maxRows {
			t.Fatalf("message %d: %d embeds, %d rows", i, len(m.Embeds), len(m.Components))
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
	if calls != 13 || len(msgs[0].Components) != 5 || !strings.Contains(msgs[1].Content, "part 2 of 2") {
		t.Fatalf("split: %d calls, first message %d rows, second %q", calls, len(msgs[0].Components), msgs[1].Content)
	}
	// Deciding calls never moves a call to another message.
	for i := range c.Calls {
		c.Calls[i].Decision = confirm.DecisionDenied
		c.Calls[i].DecidedBy = moderator
	}
	done := RenderMessages(c)
	if len(done) != 2 || len(done[0].Embeds) != len(msgs[0].Embeds) || len(done[0].Components) != 0 || done[0].Components == nil {
		t.Fatalf("complete split differs or keeps buttons")
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
