package slack

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/airlockhq/airlock/bot"
	cardpkg "github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
)

// unknownCard: a decided card whose gated call's run ended unknown,
// checked or not.
func unknownCard(checked bool) cardpkg.Card {
	c := baseCard()
	c.Status = confirm.BatchDone
	c.Calls[0].Run, c.Calls[0].Result = confirm.RunSucceeded, "api: healthy"
	c.Calls[1].State = cardpkg.State{Kind: cardpkg.Allowed, By: "UALICE", At: &decided}
	c.Calls[1].Run, c.Calls[1].Result = confirm.RunUnknown, confirm.UncertainOutcomeMessage
	c.Calls[1].Check = &cardpkg.Check{Ref: confirm.CheckedRef(c.BatchID, 1)}
	if checked {
		at := decided.Add(time.Minute)
		c.Calls[1].Check.By, c.Calls[1].Check.At = "UCAROL", &at
	}
	return c
}

// unknownNotice: the thread line of an ungated call whose run ended
// unknown, checked or not; its read-back is hostile.
func unknownNotice(checked bool) cardpkg.UnknownNotice {
	n := cardpkg.UnknownNotice{Number: 1, Tool: "charge", Summary: "Charge 10 <!channel> *now*",
		Check: cardpkg.Check{Ref: confirm.CheckedRef("k3q9x2abcdefghijklmnopqrst", 0)}}
	if checked {
		at := decided.Add(time.Minute)
		n.Check.By, n.Check.At = "UCAROL", &at
	}
	return n
}

// The closed card of an unknown run keeps one button, "I checked — go
// on", carrying the checked reference; once checked it has none and says
// who checked it. The same for the thread line; neither's notification
// text names a person.
func TestCheckedButtonRendering(t *testing.T) {
	for _, tc := range []struct {
		name    string
		blocks  []slack.Block
		text    string
		checked bool
	}{
		{"card", Render(unknownCard(false)), FallbackText(unknownCard(false)), false},
		{"card checked", Render(unknownCard(true)), FallbackText(unknownCard(true)), true},
		{"notice", RenderUnknownNotice(unknownNotice(false)), UnknownNoticeText(unknownNotice(false)), false},
		{"notice checked", RenderUnknownNotice(unknownNotice(true)), UnknownNoticeText(unknownNotice(true)), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bs := buttons(tc.blocks)
			raw, _ := json.Marshal(tc.blocks)
			shown, live := readBlocks(t, raw)
			if tc.checked {
				if len(bs) != 0 {
					t.Fatalf("checked: buttons %+v, want none", bs)
				}
				if !strings.Contains(shown, "Checked by <@UCAROL>") {
					t.Errorf("checked: does not say who checked it:\n%s", shown)
				}
			} else {
				if len(bs) != 1 || bs[0].ActionID != ActionChecked || !strings.HasPrefix(bs[0].Value, "checked-") || bs[0].Style != "" ||
					bs[0].Text.Text != cardpkg.CheckedLabel {
					t.Fatalf("buttons %+v, want one unstyled %q carrying a checked reference", bs, cardpkg.CheckedLabel)
				}
				if _, _, err := confirm.ParseCheckedRef(bs[0].Value); err != nil {
					t.Errorf("button value %q: %v", bs[0].Value, err)
				}
				if !strings.Contains(shown, "every call of this tool in this thread needs a person's yes") {
					t.Errorf("does not say the tool is gated:\n%s", shown)
				}
			}
			if strings.Contains(live, "Charge 10") || strings.Contains(tc.text, "<") || strings.Contains(tc.text, "UCAROL") {
				t.Errorf("hostile or personal text is live: live %q, text %q", live, tc.text)
			}
		})
	}
}

// "I checked — go on" parses only with a checked reference.
func TestParseCheckedClick(t *testing.T) {
	good := confirm.CheckedRef("k3q9x2abcdefghijklmnopqrst", 1)
	p := blockAction(alice, chanOps, mentionTS, ActionChecked, good)
	onMessage(p, "1700000000.000300")
	raw, _ := json.Marshal(p)
	in, err := parseInteraction(raw)
	if err != nil || in.Kind != cardpkg.ActChecked || in.Ref != good {
		t.Fatalf("parse = %+v, %v", in, err)
	}
	for _, bad := range []string{"k3q9x2abcdefghijklmnopqrst.1", confirm.GrantRef("g1"), "checked-K3Q.1", "checked-", "checked-abc.1.2"} {
		p := onMessage(blockAction(alice, chanOps, mentionTS, ActionChecked, bad), "1700000000.000300")
		raw, _ := json.Marshal(p)
		if _, err := parseInteraction(raw); err == nil {
			t.Errorf("ActionChecked with value %q parsed", bad)
		}
	}
	// A checked reference on another button is not a call's.
	p = onMessage(blockAction(alice, chanOps, mentionTS, ActionAllow, good), "1700000000.000300")
	raw, _ = json.Marshal(p)
	if _, err := parseInteraction(raw); err == nil {
		t.Error("Allow with a checked reference parsed")
	}
}

// End to end over the fake Slack: an ungated charge whose run ends
// unknown gets a thread line with "I checked — go on"; the same charge
// with a note gets a card (it would have run at once before); a stranger's
// click, a forged or garbled reference and a click on another message
// change nothing; an approver's click updates the line, a second click
// changes nothing and is audited once; then charge runs without a card
// again.
func TestUnknownOutcomeGatesTheToolUntilChecked(t *testing.T) {
	for _, mode := range []string{ModeSocket, ModeHTTP} {
		t.Run(mode, func(t *testing.T) {
			w := newWorldWith(t, mode, func(c *bot.Config) { c.GrantFor = time.Hour })
			charge := &countTool{name: "charge", unknownRuns: 1}
			w.tools["charge"] = charge

			w.model.PushCalls(tc("call_c1", "charge", `{"amount":10}`)).PushText("The charge may or may not have gone through.")
			w.deliverEvent(mention(w.eventID(), chanOps, bob, mentionTS, "", "<@"+botUser+"> charge 10"), 0)
			w.waitText(chanOps, "The charge may or may not have gone through.")
			notice := w.waitText(chanOps, "Outcome unknown for call 1")
			w.ad.Wait()
			if notice.param("thread_ts") != mentionTS || charge.runs.Load() != 1 || len(w.cards()) != 0 {
				t.Fatalf("notice in thread %q, runs %d, cards %d", notice.param("thread_ts"), charge.runs.Load(), len(w.cards()))
			}
			checked := buttonsWith(t, notice, ActionChecked)
			if len(checked) != 1 || !strings.HasPrefix(checked[0].Value, "checked-") {
				t.Fatalf("notice buttons %+v, want one I checked — go on", cardButtons(t, notice))
			}
			ref := checked[0].Value

			// The retry with a note: a card, no grant offered, nothing run.
			w.model.PushCalls(tc("call_c2", "charge", `{"amount":10,"note":"retry"}`)) // abandoned below: no answer
			w.deliverEvent(mention(w.eventID(), chanOps, bob, "1700000000.000200", mentionTS, "<@"+botUser+"> try again"), 0)
			retry := w.waitCard(1)
			w.ad.Wait()
			if charge.runs.Load() != 1 {
				t.Fatal("the retry of a charge whose outcome is unknown ran without a yes")
			}
			if txt := blocksText(t, retry); !strings.Contains(txt, "unknown outcome") {
				t.Errorf("the retry card does not say why:\n%s", txt)
			}
			if b := buttonsWith(t, retry, ActionAllowGrant); len(b) != 0 {
				t.Errorf("the retry card offers a grant: %+v", b)
			}
			retryBatch, _, _ := confirm.ParseRef(refByStyle(t, retry, "primary"))

			unchanged := func(why string) {
				t.Helper()
				w.ad.Wait()
				if n := len(w.audit(confirm.AuditUnknownChecked)); n != 0 {
					t.Fatalf("%s: %d unknown_checked events", why, n)
				}
				conv, err := w.db.FindConversation(context.Background(), Platform, chanOps, mentionTS)
				if err != nil {
					t.Fatal(err)
				}
				if u, err := w.db.UnknownCalls(context.Background(), conv.ID); err != nil || len(u) != 1 {
					t.Fatalf("%s: unknown runs %d, %v; want the one, unchecked", why, len(u), err)
				}
			}
			rejected := len(w.audit(confirm.AuditRejectedClick))
			// Mallory is no approver.
			w.deliverInteraction(blockAction(mallory, chanOps, mentionTS, ActionChecked, ref))
			w.waitEphemeral(mallory, "can't approve")
			unchanged("a stranger's click")
			// A forged reference: a batch that does not exist.
			w.deliverInteraction(blockAction(alice, chanOps, mentionTS, ActionChecked, confirm.CheckedRef("zzzzzzzzzzzz", 0)))
			w.waitEphemeral(alice, "This button is not one I know")
			unchanged("a forged reference")
			// The real reference clicked on the retry's card, which does not carry it.
			w.deliverInteraction(clickOn(retry, alice, ActionChecked, ref))
			waitFor(t, "second refusal", func() bool { return len(w.ephemerals(alice)) >= 2 })
			unchanged("a click on another message")
			// The retry's own call, which never ran: nothing to check.
			w.deliverInteraction(clickOn(retry, alice, ActionChecked, confirm.CheckedRef(retryBatch, 0)))
			w.waitEphemeral(alice, "already marked checked")
			unchanged("a call that never ran")
			if n := len(w.audit(confirm.AuditRejectedClick)); n != rejected+3 {
				t.Errorf("%d rejected clicks audited, want %d", n, rejected+3)
			}
			// A garbled reference is refused before the bot sees it.
			garbled := blockAction(alice, chanOps, mentionTS, ActionChecked, "checked-"+strings.ToUpper(ref[len("checked-"):]))
			if mode == ModeHTTP {
				raw, _ := json.Marshal(onMessage(garbled, notice.TS))
				body := []byte(url.Values{"payload": {string(raw)}}.Encode())
				if code, _ := w.post(body, http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, true, time.Now()); code != http.StatusBadRequest {
					t.Errorf("garbled reference: HTTP %d, want 400", code)
				}
			} else {
				w.deliverInteraction(onMessage(garbled, notice.TS))
			}
			unchanged("a garbled reference")

			// Alice checked: the line says so, without the button.
			updates := len(w.fake.callsTo("chat.update"))
			w.deliverInteraction(blockAction(alice, chanOps, mentionTS, ActionChecked, ref))
			upd := w.waitUpdates(updates + 1)
			w.ad.Wait()
			if upd.param("ts") != notice.TS || len(cardButtons(t, upd)) != 0 || !strings.Contains(blocksText(t, upd), "Checked by <@"+alice+">") {
				t.Fatalf("the line after the check: ts %s (want %s), buttons %+v:\n%s", upd.param("ts"), notice.TS, cardButtons(t, upd), blocksText(t, upd))
			}
			// Again: nothing changes, audited once.
			w.deliverInteraction(onMessage(blockAction(alice, chanOps, mentionTS, ActionChecked, ref), notice.TS))
			waitFor(t, "the double click's answer", func() bool {
				n := 0
				for _, e := range w.ephemerals(alice) {
					if strings.Contains(e.param("text"), "already marked checked") {
						n++
					}
				}
				return n >= 2
			})
			w.ad.Wait()
			if evs := w.audit(confirm.AuditUnknownChecked); len(evs) != 1 || evs[0].Actor != alice || evs[0].Tool != "charge" {
				t.Fatalf("unknown_checked events %+v, want one by alice", evs)
			}

			// The policy judges charge as usual again: it runs at once.
			w.model.PushCalls(tc("call_c3", "charge", `{"amount":10,"note":"retry"}`)).PushText("Charged after the check.")
			w.deliverEvent(mention(w.eventID(), chanOps, bob, "1700000000.000400", mentionTS, "<@"+botUser+"> charge it now"), 0)
			w.waitText(chanOps, "Charged after the check.")
			w.ad.Wait()
			if n := charge.runs.Load(); n != 2 || len(w.cards()) != 1 {
				t.Fatalf("after the check: runs %d (want 2), cards %d (want 1)", n, len(w.cards()))
			}
		})
	}
}
