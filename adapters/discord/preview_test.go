package discord

import (
	"io"
	"strings"
	"testing"

	"github.com/bwmarrin/discordgo"

	"github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
)

const previewDiff = "diff -u -N /tmp/LIVE/apps.v1.Deployment.web /tmp/MERGED/apps.v1.Deployment.web\n@@ -6,7 +6,7 @@\n spec:\n-  replicas: 2\n+  replicas: 20\n"

const hostilePreview = "<@&" + modRole + "> @everyone @here <@1>\n```\n||spoiler|| [x](http://evil) *b* `t`\n```\u202egnp.exe\u200b\n"

func previewSample(p card.Preview) card.Card {
	c := sampleCard()
	c.Calls[1].Preview = &p
	return c
}

func longPreviewText() string {
	return strings.Repeat("+  replicas: 20 # a long line of the plan\n", 80)
}

// cutPreview is a preview Airlock kept only the start of: its output was
// 3,616 bytes longer than what is stored, its hash the whole's.
func cutPreview() card.Preview {
	return card.Preview{State: confirm.PreviewDone, Output: longPreviewText(), Hash: confirm.PreviewHash(longPreviewText() + "rest"),
		Size: int64(len(longPreviewText())) + 3616}
}

// A preview Airlock kept in part says so on the card and in the reply to
// Show full preview, with how much was left out.
func TestPreviewCutSaysSo(t *testing.T) {
	c := previewSample(cutPreview())
	want := "3,616 bytes are left out"
	field := ""
	for _, f := range RenderMessages(c)[0].Embeds[1].Fields {
		if f.Name == previewFieldLabel {
			field = f.Value
		}
	}
	if !strings.Contains(field, want) {
		t.Errorf("card's preview field %q, want %q", field, want)
	}
	if r := PreviewReply(c.Calls[1]); !strings.Contains(r.Content, want) {
		t.Errorf("reply %q, want %q", r.Content, want)
	}
}

func TestRenderPreviewGolden(t *testing.T) {
	golden(t, "card_preview_running.json", render(previewSample(card.Preview{State: confirm.PreviewRunning})))
	golden(t, "card_preview_done.json", render(previewSample(card.Preview{State: confirm.PreviewDone, Output: previewDiff, Hash: confirm.PreviewHash(previewDiff)})))
	golden(t, "card_preview_failed.json", render(previewSample(card.Preview{State: confirm.PreviewFailed, Output: "exit status 2: the server could not be reached (token [redacted])"})))
	golden(t, "card_preview_long.json", render(previewSample(card.Preview{State: confirm.PreviewDone, Output: longPreviewText(), Hash: confirm.PreviewHash(longPreviewText())})))
	golden(t, "card_preview_cut.json", render(previewSample(cutPreview())))
	changed := previewSample(card.Preview{State: confirm.PreviewDone, Output: previewDiff, Hash: confirm.PreviewHash(previewDiff),
		Recheck: confirm.RecheckChanged, RecheckHash: confirm.PreviewHash("other")})
	changed.Status = confirm.BatchDone
	for i := range changed.Calls {
		changed.Calls[i].State = card.State{Kind: card.Allowed, By: moderator}
	}
	changed.Calls[1].Run, changed.Calls[1].Result = confirm.RunFailed, confirm.PreviewChangedMessage(confirm.PreviewHash(previewDiff), confirm.PreviewHash("other"))
	golden(t, "card_preview_recheck_changed.json", render(changed))
}

// "Show full preview" (custom id al:w:<the call's reference>) only where
// the card cut the preview; its reply is ephemeral, pings nobody, and a
// long preview comes as a file.
func TestPreviewButtonAndReply(t *testing.T) {
	ids := func(c card.Card) []string {
		var out []string
		for _, m := range RenderMessages(c) {
			for _, row := range componentMaps(t, m.Components) {
				for _, b := range row["components"].([]any) {
					if id := b.(map[string]any)["custom_id"].(string); strings.HasPrefix(id, "al:w:") {
						out = append(out, id)
					}
				}
			}
		}
		return out
	}
	short := previewSample(card.Preview{State: confirm.PreviewDone, Output: previewDiff, Hash: confirm.PreviewHash(previewDiff)})
	if got := ids(short); len(got) != 0 {
		t.Errorf("a short preview offers %v", got)
	}
	long := previewSample(card.Preview{State: confirm.PreviewDone, Output: longPreviewText(), Hash: confirm.PreviewHash(longPreviewText())})
	if got := ids(long); len(got) != 1 || got[0] != "al:w:"+long.Calls[1].Ref {
		t.Errorf("a long preview offers %v", got)
	}
	if a, ref, ok := parseCustomID("al:w:" + long.Calls[1].Ref); !ok || a != actionPreview || ref != long.Calls[1].Ref {
		t.Errorf("parseCustomID = %q %q %v", a, ref, ok)
	}
	r := PreviewReply(long.Calls[1])
	if r.Flags != discordgo.MessageFlagsEphemeral || r.AllowedMentions == nil || len(r.AllowedMentions.Parse) != 0 {
		t.Fatalf("reply not ephemeral or may ping: %+v", r)
	}
	if len(r.Files) != 1 || r.Files[0].Name != PreviewFileName || runes(r.Content) > maxContent {
		t.Fatalf("long preview: content %q, %d files", r.Content, len(r.Files))
	}
	body, _ := io.ReadAll(r.Files[0].Reader)
	if string(body) != longPreviewText() {
		t.Error("the file is not the whole preview")
	}
}

// A hostile preview can't ping, break out of its code block or hide text.
func TestHostilePreviewIsInert(t *testing.T) {
	for _, p := range []card.Preview{
		{State: confirm.PreviewDone, Output: hostilePreview, Hash: confirm.PreviewHash(hostilePreview)},
		{State: confirm.PreviewFailed, Output: hostilePreview},
	} {
		c := previewSample(p)
		for _, m := range RenderMessages(c) {
			for _, e := range m.Embeds {
				for _, f := range e.Fields {
					if bad := liveMarkup(f.Value); len(bad) != 0 {
						t.Errorf("live in %q: %v", f.Value, bad)
					}
				}
			}
		}
		_, embeds, _ := Render(c)
		v := field(embedMap(t, embeds[1]), previewFieldLabel)
		if !strings.Contains(v, `\u0060\u0060\u0060`) || !strings.Contains(v, `\u202egnp`) || strings.Count(v, "```") != 2 {
			t.Errorf("preview field %q: fences and hidden characters must be escaped, one code block", v)
		}
		r := PreviewReply(c.Calls[1])
		if bad := liveMarkup(r.Content); len(bad) != 0 {
			t.Errorf("live in the reply %q: %v", r.Content, bad)
		}
	}
}
