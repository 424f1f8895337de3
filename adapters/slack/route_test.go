package slack

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock/bot"
	cardpkg "github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/internal/testkit"
)

// Issue 13 in the adapter: Edit…, Extend, escalations, copies of cards
// away from their thread and the thread's pointer, rendered and parsed;
// the edit modal answered with the edit's outcome; the Router methods
// against the fake Slack. The real bot's side is in e2e_route_test.go.

const (
	chanApprovals = "C0APPROVALS"
	cardTS        = "1800000000.000042"
)

// --- fixtures ---

// evilEdit is an approver's edit whose values (which came from the model
// or the editor) try to ping, link and hide.
var evilEdit = "web <!here> <@U123> <!channel> <https://evil.example|x> :skull: *b* \u202e\u200b"

func editableCard() cardpkg.Card {
	c := baseCard()
	c.ExtendRef, c.ExtendBy = c.Calls[1].Ref, 30*time.Minute
	c.Calls[1].Editable = true
	return c
}

func editedCard() cardpkg.Card {
	c := editableCard()
	after := jsonString(evilEdit)
	c.Calls[1].Summary = "Deploy " + evilEdit + " to production"
	c.Calls[1].Args = "{\n  \"environment\": \"production\",\n  \"replicas\": 12,\n  \"service\": " + string(after) + "\n}"
	c.Calls[1].Edited = &cardpkg.Edit{By: "UALICE", At: decided, Changes: []cardpkg.Change{
		{Key: "replicas", Before: "", After: "12"},
		{Key: "service", Before: `"api"`, After: string(after)},
		{Key: "<!channel>\n<@U123>", Before: `"x"`, After: ""},
	}}
	return c
}

// jsonString is s as a JSON string, as the bot's compact JSON writes it
// (no HTML escaping).
func jsonString(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		panic(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func extendedCard() cardpkg.Card {
	c := editableCard()
	c.ExpiresAt = t0.Add(60 * time.Minute)
	c.Extended = &cardpkg.Extension{By: "UCAROL", At: decided}
	return c
}

func escalationsCard() cardpkg.Card {
	c := editableCard()
	c.Escalations = []cardpkg.Escalation{
		{At: t0.Add(10 * time.Minute), Mention: confirm.Approvers{Groups: []string{"SLEADS"}}, Approvers: confirm.Approvers{Users: []string{"ULEAD"}}, Fired: true},
		{At: t0.Add(20 * time.Minute), Mention: confirm.Approvers{Users: []string{"UBOSS"}}},
		{At: t0.Add(25 * time.Minute), Mention: confirm.Approvers{Users: []string{"<@UMALLORY>"}, Groups: []string{"<!here>"}, Roles: []string{"<!channel>"}}},
	}
	return c
}

func dmCopyCard() cardpkg.Card {
	c := editableCard()
	c.Copy, c.ThreadLink = cardpkg.CopyDM, permalink(chanOps, mentionTS)
	return c
}

func approvalsCopyCard() cardpkg.Card {
	c := editableCard()
	c.Copy, c.ThreadLink = cardpkg.CopyApprovals, permalink(chanOps, mentionTS)
	return c
}

func waitingPointer() cardpkg.Pointer {
	c := baseCard()
	return cardpkg.Pointer{BatchID: c.BatchID, Channel: chanApprovals, CardLink: permalink(chanApprovals, cardTS), Status: c.Status, Calls: c.Calls}
}

func completePointer() cardpkg.Pointer {
	c := completeCard()
	return cardpkg.Pointer{BatchID: c.BatchID, Channel: chanApprovals, CardLink: permalink(chanApprovals, cardTS), Status: c.Status, Calls: c.Calls}
}

// --- rendering ---

// An edited call says who edited it and what changed, every value
// literal: the model's or the editor's <!here>, <@U123>, links and
// hidden characters ping nobody and hide nothing; the read-back and
// arguments shown are the edited ones; the notification text names
// nobody.
func TestRenderEditedCallIsInert(t *testing.T) {
	card := editedCard()
	blocks := RenderWith(card, nil)
	shown, live := readBlocks(t, mustJSON(blocks))
	text := FallbackText(card)
	if bad := liveProblems(live+text, shown+text); len(bad) != 0 {
		t.Fatalf("live or hidden: %v\nlive:\n%s", bad, live)
	}
	if strings.Contains(live, "U123") || strings.Contains(live, "UALICE") && !strings.Contains(shown, "Edited by <@UALICE>") {
		t.Errorf("someone the edit named is mentioned:\n%s", live)
	}
	revealed := `web <!here> <@U123> <!channel> <https://evil.example|x> :skull: *b* \u202e\u200b`
	testkit.ContainsAll(t, "the card", shown,
		"Edited by <@UALICE> 2026-11-29 12:01:30 UTC. The read-back and arguments shown are the edited ones; it runs with them. Changed:",
		"replicas: (not set) → 12",
		`service: "api" → "`+revealed+`"`,
		`<!channel>\n<@U123>: "x" → (not set)`,
		"Deploy "+revealed+" to production", // the new read-back
		`"service": "`+revealed+`"`,         // the new arguments
	)
	if !strings.Contains(text, "(arguments edited by an approver)") || strings.ContainsAny(text, "<>") || strings.Contains(text, "ALICE") {
		t.Errorf("notification text %q", text)
	}
}

// Edit… is offered on each waiting editable call (no style, the call's
// reference), Extend once per card (no style, Card.ExtendRef) until the
// card is extended or closed.
func TestRenderEditAndExtendButtons(t *testing.T) {
	count := func(c cardpkg.Card, action string) (n int, values []string) {
		for _, b := range buttons(RenderWith(c, nil)) {
			if b.ActionID == action {
				n++
				values = append(values, b.Value)
				if b.Style != "" {
					t.Errorf("%s has style %q", action, b.Style)
				}
			}
		}
		return n, values
	}
	c := editableCard()
	if n, v := count(c, ActionEdit); n != 1 || v[0] != c.Calls[1].Ref {
		t.Errorf("Edit… buttons %d %v, want one carrying %s", n, v, c.Calls[1].Ref)
	}
	if n, v := count(c, ActionExtend); n != 1 || v[0] != c.ExtendRef {
		t.Errorf("Extend buttons %d %v", n, v)
	}
	if !strings.Contains(string(mustJSON(RenderWith(c, nil))), `"text":"Extend 30m"`) {
		t.Error("the Extend button is not labelled with the time it adds")
	}
	if n, _ := count(pendingCard(), ActionEdit); n != 0 {
		t.Error("Edit… on a call that is not editable")
	}
	if n, _ := count(pendingCard(), ActionExtend); n != 0 {
		t.Error("Extend without an ExtendRef")
	}
	if n, _ := count(extendedCard(), ActionExtend); n != 0 {
		t.Error("Extend offered again after the card was extended")
	}
	done := editableCard()
	done.Calls[1].State = cardpkg.State{Kind: cardpkg.Allowed, By: "UALICE", At: &decided}
	if n := len(buttons(RenderWith(done, nil))); n != 0 {
		t.Errorf("a closed card has %d buttons", n)
	}
	shown, _ := readBlocks(t, mustJSON(RenderWith(extendedCard(), nil)))
	if !strings.Contains(shown, "Extended by <@UCAROL> 2026-11-29 12:01:30 UTC; now expires at 13:00 UTC.") {
		t.Errorf("the extended card does not say so:\n%s", shown)
	}
}

// Escalation steps are listed with when they fire, whom they mention and
// who may decide then; people are user and usergroup elements (never
// mrkdwn), anything that is no Slack id literal text.
func TestRenderEscalations(t *testing.T) {
	card := escalationsCard()
	shown, live := readBlocks(t, mustJSON(RenderWith(card, nil)))
	if bad := liveProblems(live, shown); len(bad) != 0 {
		t.Fatalf("live: %v\n%s", bad, live)
	}
	testkit.ContainsAll(t, "the card", shown,
		"Escalated at 12:10 UTC: mentioned <!subteam^SLEADS>; may now also decide: <@ULEAD>.",
		"Escalates at 12:20 UTC: will mention <@UBOSS>.",
		"Escalates at 12:25 UTC: will mention <@UMALLORY>, group <!here>, role <!channel>.",
	)
	raw := string(mustJSON(RenderWith(card, nil)))
	for _, who := range []string{"<!subteam^SLEADS>", "<@ULEAD>", "<@UBOSS>", "UMALLORY>"} {
		if strings.Contains(raw, who) {
			t.Errorf("%s is mrkdwn on the card, not an element:\n%s", who, raw)
		}
	}
	// Closed: only the step that fired is still listed.
	card.Calls[1].State = cardpkg.State{Kind: cardpkg.Expired}
	shown, _ = readBlocks(t, mustJSON(RenderWith(card, nil)))
	if !strings.Contains(shown, "Escalated at 12:10") || strings.Contains(shown, "Escalates at") {
		t.Errorf("closed card's escalations:\n%s", shown)
	}
}

// A copy away from the thread says where it stands and links back to the
// conversation; a link that is no plain http(s) URL is not shown.
func TestRenderCopies(t *testing.T) {
	link := "[View the conversation](" + permalink(chanOps, mentionTS) + ")"
	for name, tc := range map[string]struct {
		card cardpkg.Card
		says string
	}{
		"dm":        {dmCopyCard(), "A copy of an approval card, sent to you as an approver. A decision on any copy counts once, and every copy shows it."},
		"approvals": {approvalsCopyCard(), "Posted here for approval; the conversation goes on in its own thread."},
	} {
		shown, live := readBlocks(t, mustJSON(RenderWith(tc.card, nil)))
		if bad := liveProblems(live, shown); len(bad) != 0 {
			t.Errorf("%s: live: %v", name, bad)
		}
		if !strings.Contains(shown, tc.says+" "+link) {
			t.Errorf("%s: the copy does not say %q with the link:\n%s", name, tc.says, shown)
		}
	}
	if shown, _ := readBlocks(t, mustJSON(RenderWith(pendingCard(), nil))); strings.Contains(shown, "View the conversation") {
		t.Error("a card in its own thread links to it")
	}
	for _, bad := range []string{"javascript:alert(1)", "https://evil.example/|<!here>", "https://evil.example/ x", "https://evil.example/\u202e", "//evil.example/", "https://user@evil.example/", "ftp://x/"} {
		c := dmCopyCard()
		c.ThreadLink = bad
		shown, _ := readBlocks(t, mustJSON(RenderWith(c, nil)))
		if strings.Contains(shown, "View the conversation") {
			t.Errorf("link %q shown", bad)
		}
	}
}

// The pointer has no buttons, names the approvals channel with a channel
// reference (which notifies nobody) and links to the card; once every
// call is decided it lists each call's outcome as the card does. Its
// plain text names nobody and holds no model text.
func TestRenderPointer(t *testing.T) {
	wait := waitingPointer()
	shown, live := readBlocks(t, mustJSON(RenderPointer(wait)))
	if want := "Waiting for approval in <#" + chanApprovals + "> — [View the card](" + wait.CardLink + ")"; !strings.Contains(shown, want) {
		t.Errorf("waiting pointer reads:\n%s\nwant %q", shown, want)
	}
	if got := PointerText(wait); got != "Waiting for approval in <#"+chanApprovals+">" {
		t.Errorf("waiting pointer text %q", got)
	}
	if live != "" || len(buttons(RenderPointer(wait))) != 0 {
		t.Errorf("waiting pointer: live %q, buttons %v", live, buttons(RenderPointer(wait)))
	}

	done := completePointer()
	done.Calls = append(done.Calls, cardpkg.Call{Number: 7, Tool: "evil <!channel>", State: cardpkg.State{Kind: cardpkg.Denied, By: "<!here>", Reason: "<@U123> <!everyone> \u202e"}})
	blocks := RenderPointer(done)
	shown, live = readBlocks(t, mustJSON(blocks))
	text := PointerText(done)
	if bad := liveProblems(live+strings.ReplaceAll(text, "<#"+chanApprovals+">", ""), shown+text); len(bad) != 0 {
		t.Fatalf("closed pointer live: %v\nlive %q\ntext %q", bad, live, text)
	}
	if len(buttons(blocks)) != 0 {
		t.Error("the pointer has buttons")
	}
	testkit.ContainsAll(t, "closed pointer", shown,
		"Approval request in <#"+chanApprovals+"> closed — [View the card](",
		"1. service_status  ·  :arrow_forward: Runs with the batch (no approval needed)  ·  :heavy_check_mark: succeeded",
		"2. deploy  ·  :white_check_mark: Allowed by <@UALICE> 2026-11-29 12:01:30 UTC  ·  :x: failed: exit status 1: rollout timed out <after 5m>",
		"3. drop_table  ·  :no_entry_sign: Denied by <@UALICE> 2026-11-29 12:01:30 UTC; not run\nReason: not during the freeze",
		"7. evil <!channel>  ·  :no_entry_sign: Denied by <!here>; not run\nReason: <@U123> <!everyone> \\u202e",
	)
	if strings.Contains(text, "ALICE") || strings.Contains(text, "evil") || !strings.HasPrefix(text, "Approval request in <#"+chanApprovals+"> closed\n1. service_status — runs with the batch; succeeded") {
		t.Errorf("closed pointer text %q", text)
	}

	// A channel that is no Slack id, a link that is no URL: words, no link.
	evil := waitingPointer()
	evil.Channel, evil.CardLink = "<!here>", "https://evil.example/|<!channel>"
	shown, live = readBlocks(t, mustJSON(RenderPointer(evil)))
	text = PointerText(evil)
	if bad := liveProblems(live+text, shown+text); len(bad) != 0 || strings.Contains(shown, "View the card") || !strings.Contains(shown, "Waiting for approval in the approvals channel") {
		t.Errorf("hostile pointer: %v\n%s\n%q", bad, shown, text)
	}
}

// The edit modal holds the arguments whole in one multi-line input
// (Slack's 3000 characters at most), labelled with the call's number and
// tool, with the card's reference, place and message in its metadata.
func TestEditModal(t *testing.T) {
	meta := ModalMeta{Ref: "abc.1", Channel: chanApprovals, Message: CardRef(chanApprovals, cardTS)}
	args := "{\n  \"service\": \"<!here> \u202e\"\n}"
	m := EditModal(meta, bot.EditForm{Ref: "abc.1", Number: 2, Tool: "deploy", Args: args, Summary: "Deploy <!channel>"})
	raw := mustJSON(m)
	var view struct {
		CallbackID      string `json:"callback_id"`
		PrivateMetadata string `json:"private_metadata"`
		Blocks          []struct {
			Type    string `json:"type"`
			BlockID string `json:"block_id"`
			Label   struct {
				Text  string `json:"text"`
				Emoji bool   `json:"emoji"`
			} `json:"label"`
			Element struct {
				Type         string `json:"type"`
				ActionID     string `json:"action_id"`
				InitialValue string `json:"initial_value"`
				Multiline    bool   `json:"multiline"`
				MaxLength    int    `json:"max_length"`
			} `json:"element"`
		} `json:"blocks"`
	}
	if err := json.Unmarshal(raw, &view); err != nil {
		t.Fatal(err)
	}
	if view.CallbackID != CallbackEdit || view.PrivateMetadata != meta.encode() {
		t.Fatalf("callback %q metadata %q", view.CallbackID, view.PrivateMetadata)
	}
	var inputs int
	for _, b := range view.Blocks {
		if b.Type != "input" {
			continue
		}
		inputs++
		if b.BlockID != EditBlockID || b.Element.ActionID != editActionID || !b.Element.Multiline || b.Element.MaxLength != MaxEditChars {
			t.Errorf("input %+v", b)
		}
		if want := "{\n  \"service\": \"<!here> \\u202e\"\n}"; b.Element.InitialValue != want {
			t.Errorf("initial value %q, want the arguments as given, hidden characters escaped: %q", b.Element.InitialValue, want)
		}
		if b.Label.Text != "Arguments (JSON): submitting allows the call" || b.Label.Emoji {
			t.Errorf("label %+v", b.Label)
		}
	}
	if inputs != 1 {
		t.Fatalf("%d inputs", inputs)
	}
	shown, live := readBlocks(t, raw)
	if bad := liveProblems(live, strings.ReplaceAll(shown, args, "")); len(bad) != 0 {
		t.Errorf("modal live: %v\n%s", bad, live)
	}
	if !strings.Contains(shown, "You are editing call 2, deploy") || !strings.Contains(shown, "Deploy <!channel>") {
		t.Errorf("modal reads:\n%s", shown)
	}
}

// --- parsing ---

func TestParseRouteInteractions(t *testing.T) {
	ref := "abcdefgh.1"
	msg := CardRef(chanApprovals, cardTS)
	click := func(user, channel, thread, action, ref string) map[string]any {
		return onMessage(blockAction(user, channel, thread, action, ref), cardTS)
	}
	in, err := parseInteraction(mustJSON(click(alice, chanApprovals, "", ActionExtend, ref)))
	if err != nil || in.Kind != cardpkg.ActExtend || in.Ref != ref || in.Message != msg || in.Channel != chanApprovals || in.Thread != "" {
		t.Errorf("extend: %+v %v", in, err)
	}
	in, err = parseInteraction(mustJSON(click(alice, "DALICE", "", ActionEdit, ref)))
	if err != nil || in.Kind != cardpkg.ActEdit || in.Submit || in.Message != CardRef("DALICE", cardTS) || in.TriggerID == "" {
		t.Errorf("edit: %+v %v", in, err)
	}
	// Only the container says which message: enough.
	onlyContainer := click(alice, chanOps, mentionTS, ActionAllow, ref)
	delete(onlyContainer, "message")
	if in, err := parseInteraction(mustJSON(onlyContainer)); err != nil || in.Message != CardRef(chanOps, cardTS) || in.Thread != mentionTS {
		t.Errorf("container only: %+v %v", in, err)
	}

	meta := ModalMeta{Ref: ref, Channel: chanApprovals, Message: msg}.encode()
	hostile := "  {\"service\": \"<!here> <@U123> \u202e\"}\n"
	in, err = parseInteraction(mustJSON(editSubmission(alice, meta, hostile)))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, interaction{Interaction: bot.Interaction{Platform: Platform, Kind: cardpkg.ActEdit, Submit: true, User: alice, Channel: chanApprovals, Message: msg, Ref: ref,
		Value: strings.TrimSpace(hostile)}, Team: "T0TEST", TriggerID: "12345.98765.ffff"}) {
		t.Errorf("edit submission: %+v", in)
	}
	// The deny-reason modal keeps the card message too.
	if in, err := parseInteraction(mustJSON(viewSubmission(alice, meta, "no"))); err != nil || in.Message != msg {
		t.Errorf("deny reason with message: %+v %v", in, err)
	}

	bad := map[string]map[string]any{}
	noTS := blockAction(alice, chanOps, mentionTS, ActionAllow, ref)
	delete(noTS["container"].(map[string]any), "message_ts")
	delete(noTS["message"].(map[string]any), "ts")
	bad["no message ts"] = noTS
	noTSEdit := blockAction(alice, chanOps, mentionTS, ActionEdit, ref)
	delete(noTSEdit["container"].(map[string]any), "message_ts")
	delete(noTSEdit, "message")
	bad["edit without message ts"] = noTSEdit
	bad["malformed message ts"] = onMessage(blockAction(alice, chanOps, mentionTS, ActionExtend, ref), "<!here>")
	disagree := click(alice, chanOps, mentionTS, ActionAllow, ref)
	disagree["message"].(map[string]any)["ts"] = "1800000000.000099"
	bad["container and message disagree"] = disagree
	otherChannel := click(alice, chanOps, mentionTS, ActionAllow, ref)
	otherChannel["container"].(map[string]any)["channel_id"] = chanOther
	bad["message in another channel"] = otherChannel
	bad["extend with a grant reference"] = click(alice, chanOps, "", ActionExtend, confirm.GrantRef("abc"))
	bad["edit with the tool and arguments"] = click(alice, chanOps, "", ActionEdit, `deploy {"service":"api"}`)
	noTrigger := click(alice, chanOps, "", ActionEdit, ref)
	delete(noTrigger, "trigger_id")
	bad["edit without trigger"] = noTrigger

	forged := editSubmission(alice, meta, "{}")
	forged["view"].(map[string]any)["callback_id"] = "airlock_edit_v2"
	bad["unknown callback"] = forged
	swapped := editSubmission(alice, meta, "{}")
	swapped["view"].(map[string]any)["callback_id"] = CallbackShowArgs
	bad["read-only modal submitted"] = swapped
	bad["edit metadata without message"] = editSubmission(alice, ModalMeta{Ref: ref, Channel: chanApprovals}.encode(), "{}")
	bad["edit metadata message elsewhere"] = editSubmission(alice, ModalMeta{Ref: ref, Channel: chanApprovals, Message: CardRef(chanOps, cardTS)}.encode(), "{}")
	bad["edit metadata message malformed"] = editSubmission(alice, ModalMeta{Ref: ref, Channel: chanApprovals, Message: chanApprovals + "/<!here>"}.encode(), "{}")
	bad["edit metadata not JSON"] = editSubmission(alice, "deploy", "{}")
	bad["edit metadata without ref"] = editSubmission(alice, `{"channel":"`+chanApprovals+`","message":"`+msg+`"}`, "{}")
	bad["edit metadata bad thread"] = editSubmission(alice, ModalMeta{Ref: ref, Channel: chanApprovals, Thread: "soon", Message: msg}.encode(), "{}")
	noValue := editSubmission(alice, meta, "{}")
	delete(noValue["view"].(map[string]any)["state"].(map[string]any)["values"].(map[string]any)[EditBlockID].(map[string]any)[editActionID].(map[string]any), "value")
	bad["edit without value"] = noValue
	wrongBlock := editSubmission(alice, meta, "{}")
	wrongBlock["view"].(map[string]any)["state"] = map[string]any{"values": map[string]any{reasonBlockID: map[string]any{reasonActionID: map[string]any{"type": "plain_text_input", "value": "{}"}}}}
	bad["edit with the reason's input"] = wrongBlock
	bad["edit longer than the form"] = editSubmission(alice, meta, `{"a":"`+strings.Repeat("x", MaxEditChars)+`"}`)
	bad["deny reason message elsewhere"] = viewSubmission(alice, ModalMeta{Ref: ref, Channel: chanApprovals, Message: CardRef(chanOps, cardTS)}.encode(), "no")
	for name, p := range bad {
		if in, err := parseInteraction(mustJSON(p)); !errors.Is(err, errBadInteraction) {
			t.Errorf("%s: accepted %+v (err %v)", name, in, err)
		}
	}
}

// --- the adapter over a stub bot ---

// newStubWorld is the adapter over a stub bot, against the fake Slack, in
// a mode.
func newStubWorld(t *testing.T, mode string, b Bot, setup ...func(*Adapter)) *world {
	t.Helper()
	fake := newFakeSlack(t)
	w := &world{t: t, mode: mode, fake: fake, logs: &testkit.Buffer{}}
	cfg := Config{Mode: mode, BotToken: testBotToken, APIURL: fake.apiURL(), HTTPClient: &http.Client{Timeout: 10 * time.Second}}
	if mode == ModeSocket {
		cfg.AppToken = testAppToken
	} else {
		cfg.SigningSecret = testSecret
	}
	ad, err := New(cfg, b, stubEvents{})
	if err != nil {
		t.Fatal(err)
	}
	w.ad = ad
	for _, f := range setup {
		f(ad)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := ad.Start(ctx); err != nil {
		t.Fatal(err)
	}
	runErr := make(chan error, 1)
	go func() { runErr <- ad.Run(ctx) }()
	if mode == ModeHTTP {
		w.events = httptest.NewServer(ad.Handler())
	} else {
		waitFor(t, "socket mode connection", func() bool { return fake.connections() > 0 })
	}
	t.Cleanup(func() {
		if s, ok := b.(interface{ releaseAll() }); ok {
			s.releaseAll()
		}
		cancel()
		<-runErr
		if w.events != nil {
			w.events.Close()
		}
	})
	return w
}

func (s *stubBot) releaseAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.release:
	default:
		close(s.release)
	}
}

func (s *stubBot) only(method string) []stubCall {
	var out []stubCall
	for _, c := range s.calls() {
		if c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// The edit modal's submission is answered with the edit's outcome, in
// both modes: a refused edit (*bot.EditError) gets response_action
// "errors" under the input, so the modal stays open and shows why; an
// accepted edit an empty answer, which closes it; any other error closes
// it and is told ephemerally. bot.Edit gets the card message and the
// arguments as typed.
func TestEditSubmissionAnswersWithOutcome(t *testing.T) {
	for _, mode := range []string{ModeHTTP, ModeSocket} {
		t.Run(mode, func(t *testing.T) {
			b := newStubBot()
			b.edit = func(_ context.Context, _ bot.Click, args string) error {
				switch args {
				case `{"service":"web"}`:
					return nil
				case `{"replicas":"<!here>"}`:
					return &bot.EditError{Message: "replicas: <!here> is not an integer\n\u202e"}
				}
				return bot.ErrAlreadyClosed
			}
			w := newStubWorld(t, mode, b)
			meta := ModalMeta{Ref: "abcdefgh.1", Channel: chanApprovals, Message: CardRef(chanApprovals, cardTS)}.encode()

			resp := w.submitView(editSubmission(alice, meta, `{"replicas":"<!here>"}`))
			var got struct {
				ResponseAction string            `json:"response_action"`
				Errors         map[string]string `json:"errors"`
			}
			if err := json.Unmarshal([]byte(resp), &got); err != nil {
				t.Fatalf("answer %q: %v", resp, err)
			}
			if got.ResponseAction != "errors" || len(got.Errors) != 1 || got.Errors[EditBlockID] != `replicas: <!here> is not an integer \u202e` {
				t.Errorf("refused edit answered %q", resp)
			}

			if resp := w.submitView(editSubmission(alice, meta, `{"service":"web"}`)); resp != "" {
				t.Errorf("accepted edit answered %q, want an empty answer", resp)
			}

			if resp := w.submitView(editSubmission(alice, meta, `{"service":"db"}`)); resp != "" {
				t.Errorf("failed edit answered %q, want an empty answer (the modal closes)", resp)
			}
			eph := w.waitEphemeral(alice, bot.UserMessage(bot.ErrAlreadyClosed))
			if eph.param("channel") != chanApprovals {
				t.Errorf("ephemeral in %s", eph.param("channel"))
			}
			w.ad.Wait()

			edits := b.only("Edit")
			if len(edits) != 3 {
				t.Fatalf("%d Edit calls", len(edits))
			}
			for _, e := range edits {
				if e.Click.Message != CardRef(chanApprovals, cardTS) || e.Click.Channel != chanApprovals || e.Click.Ref != "abcdefgh.1" || e.Click.User != alice || e.Click.Platform != Platform {
					t.Errorf("Edit got %+v", e.Click)
				}
			}
			if n := len(w.fake.callsTo("chat.postEphemeral")); n != 1 {
				t.Errorf("%d ephemerals, want 1 (refused edits are told in the modal)", n)
			}
		})
	}
}

// A malformed or forged submission of the edit modal gets 400 and never
// reaches the bot.
func TestEditSubmissionRejectsForgeries(t *testing.T) {
	b := newStubBot()
	w := newStubWorld(t, ModeHTTP, b)
	meta := ModalMeta{Ref: "abcdefgh.1", Channel: chanApprovals, Message: CardRef(chanApprovals, cardTS)}
	forged := editSubmission(alice, meta.encode(), "{}")
	forged["view"].(map[string]any)["callback_id"] = "not_airlock"
	noMsg := meta
	noMsg.Message = ""
	for name, p := range map[string]map[string]any{
		"unknown callback":        forged,
		"metadata without card":   editSubmission(alice, noMsg.encode(), "{}"),
		"metadata malformed":      editSubmission(alice, "{", "{}"),
		"no user":                 editSubmission("", meta.encode(), "{}"),
		"longer than a form fits": editSubmission(alice, meta.encode(), strings.Repeat(" ", MaxEditChars+1)),
	} {
		raw := mustJSON(p)
		body := []byte(url.Values{"payload": {string(raw)}}.Encode())
		if code, resp := w.post(body, formHeader(), true, time.Now()); code != http.StatusBadRequest {
			t.Errorf("%s: HTTP %d %s", name, code, resp)
		}
	}
	w.ad.Wait()
	if n := len(b.calls()); n != 0 {
		t.Fatalf("a forged submission reached the bot: %+v", b.calls())
	}
}

// An edit slower than the answer's deadline is not cut short: the modal
// closes at the deadline and the editor learns a refusal ephemerally.
func TestEditSubmissionSlowEdit(t *testing.T) {
	b := newStubBot()
	var finished atomic.Bool
	b.edit = func(ctx context.Context, _ bot.Click, _ string) error {
		<-b.release
		if ctx.Err() != nil {
			return ctx.Err()
		}
		finished.Store(true)
		return &bot.EditError{Message: "replicas must be at most 20"}
	}
	w := newStubWorld(t, ModeHTTP, b, func(a *Adapter) { a.editWait = 50 * time.Millisecond })
	meta := ModalMeta{Ref: "abcdefgh.1", Channel: chanApprovals, Message: CardRef(chanApprovals, cardTS)}.encode()
	start := time.Now()
	if resp := w.submitView(editSubmission(alice, meta, `{"replicas":120}`)); resp != "" {
		t.Errorf("slow edit answered %q, want an empty answer at the deadline", resp)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("answered after %v", d)
	}
	b.releaseAll()
	w.waitEphemeral(alice, "Your edit was not applied: replicas must be at most 20 Nothing changed.")
	w.ad.Wait()
	if !finished.Load() {
		t.Error("the edit was cut short by the answer's deadline")
	}
}

// Edit… opens the modal for someone the bot lets edit, with the card's
// message in its metadata; arguments longer than Slack's input are not
// opened in a form that would cut them; a refusal is told ephemerally.
func TestEditOpensModal(t *testing.T) {
	b := newStubBot()
	var form atomic.Value
	form.Store(bot.EditForm{Ref: "abcdefgh.1", Number: 2, Tool: "deploy", Args: "{\n  \"service\": \"api\"\n}"})
	b.editForm = func(c bot.Click) (bot.EditForm, error) {
		if c.User == mallory {
			return bot.EditForm{}, bot.ErrNotApprover
		}
		return form.Load().(bot.EditForm), nil
	}
	w := newStubWorld(t, ModeHTTP, b)
	onCard := func(user string) map[string]any {
		return onMessage(blockAction(user, chanApprovals, "", ActionEdit, "abcdefgh.1"), cardTS)
	}

	w.deliverInteraction(onCard(alice))
	waitFor(t, "views.open", func() bool { return len(w.fake.callsTo("views.open")) == 1 })
	view := w.fake.callsTo("views.open")[0].JSON["view"].(map[string]any)
	var meta ModalMeta
	if err := json.Unmarshal([]byte(view["private_metadata"].(string)), &meta); err != nil {
		t.Fatal(err)
	}
	if view["callback_id"] != CallbackEdit || meta != (ModalMeta{Ref: "abcdefgh.1", Channel: chanApprovals, Message: CardRef(chanApprovals, cardTS)}) {
		t.Errorf("modal %v, metadata %+v", view["callback_id"], meta)
	}
	if js := string(mustJSON(view)); !strings.Contains(js, `"initial_value":"{\n  \"service\": \"api\"\n}"`) {
		t.Errorf("the modal does not hold the arguments: %s", js)
	}
	if fc := b.only("EditForm"); len(fc) != 1 || fc[0].Click.Message != CardRef(chanApprovals, cardTS) {
		t.Errorf("EditForm got %+v", fc)
	}

	// Someone who may not decide: told why, no modal.
	w.deliverInteraction(onCard(mallory))
	w.waitEphemeral(mallory, bot.UserMessage(bot.ErrNotApprover))

	// Too large for Slack's input: told so, no modal.
	form.Store(bot.EditForm{Ref: "abcdefgh.1", Number: 2, Tool: "deploy", Args: `{"notes":"` + strings.Repeat("n", MaxEditChars) + `"}`})
	w.deliverInteraction(onCard(alice))
	eph := w.waitEphemeral(alice, "too large to edit in Slack")
	if !strings.Contains(eph.param("text"), "3,012 characters; a Slack form holds 3,000 characters") {
		t.Errorf("ephemeral %q", eph.param("text"))
	}
	w.ad.Wait()
	if n := len(w.fake.callsTo("views.open")); n != 1 {
		t.Fatalf("%d views opened, want 1", n)
	}
	if n := len(b.only("Edit")); n != 0 {
		t.Fatal("opening the form edited something")
	}
}

// Extend calls the bot with the card message; a refusal (extended once
// already) is told ephemerally and logged as a refusal.
func TestExtendClick(t *testing.T) {
	b := newStubBot()
	var n atomic.Int32
	b.extend = func(bot.Click) error {
		if n.Add(1) > 1 {
			return bot.ErrAlreadyExtended
		}
		return nil
	}
	w := newStubWorld(t, ModeSocket, b)
	click := onMessage(blockAction(alice, chanApprovals, "", ActionExtend, "abcdefgh.0"), cardTS)
	w.deliverInteraction(click)
	w.ad.Wait()
	w.deliverInteraction(onMessage(blockAction(carol, chanApprovals, "", ActionExtend, "abcdefgh.0"), cardTS))
	w.waitEphemeral(carol, bot.UserMessage(bot.ErrAlreadyExtended))
	w.ad.Wait()
	ext := b.only("Extend")
	if len(ext) != 2 || ext[0].Click.Message != CardRef(chanApprovals, cardTS) || ext[0].Click.Ref != "abcdefgh.0" || ext[0].Click.User != alice {
		t.Fatalf("Extend calls %+v", ext)
	}
	if len(w.ephemerals(alice)) != 0 {
		t.Error("the extend that counted was answered")
	}
	if !bot.IsRefusal(bot.ErrAlreadyExtended) || !bot.IsRefusal(bot.ErrNotEditable) {
		t.Error("extend and edit refusals are not refusals")
	}
}

// Every click hands the bot the card message it was on.
func TestClicksCarryTheCardMessage(t *testing.T) {
	got := make(chan bot.Click, 1)
	w := newStubWorld(t, ModeHTTP, &clickSpy{stubBot: newStubBot(), got: got})
	w.deliverInteraction(onMessage(blockAction(alice, "DALICE", "", ActionAllow, "abcdefgh.0"), cardTS))
	select {
	case c := <-got:
		if c.Message != CardRef("DALICE", cardTS) || c.Channel != "DALICE" {
			t.Errorf("Decide got %+v", c)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no decision")
	}
	w.ad.Wait()
}

type clickSpy struct {
	*stubBot
	got chan bot.Click
}

func (s *clickSpy) Interact(ctx context.Context, in bot.Interaction) (bot.Reply, error) {
	return bot.Dispatch(ctx, s, in)
}

func (s *clickSpy) Decide(_ context.Context, c bot.Click) error {
	s.got <- c
	return nil
}

// --- Router, against the fake Slack ---

func TestRouterMethods(t *testing.T) {
	b := newStubBot()
	w := newStubWorld(t, ModeHTTP, b)
	ctx := context.Background()
	th := bot.Thread{Platform: Platform, Channel: chanOps, Thread: mentionTS}

	// The thread's root message, and a message by its reference.
	if got, err := w.ad.Link(ctx, th, ""); err != nil || got != permalink(chanOps, mentionTS) {
		t.Errorf("thread link %q %v", got, err)
	}
	if got, err := w.ad.Link(ctx, th, CardRef(chanApprovals, cardTS)); err != nil || got != permalink(chanApprovals, cardTS) {
		t.Errorf("card link %q %v", got, err)
	}
	links := w.fake.callsTo("chat.getPermalink")
	if len(links) != 2 || links[0].param("channel") != chanOps || links[0].param("message_ts") != mentionTS {
		t.Errorf("chat.getPermalink calls %+v", links)
	}
	for name, tc := range map[string]struct {
		th  bot.Thread
		ref string
	}{
		"top of a DM":   {bot.Thread{Platform: Platform, Channel: dmBob}, ""},
		"malformed ref": {th, "C0OPS:1.2"},
	} {
		if got, err := w.ad.Link(ctx, tc.th, tc.ref); err == nil {
			t.Errorf("%s: link %q", name, got)
		}
	}

	// A DM with an approver: opened once, then remembered.
	for i := 0; i < 2; i++ {
		dm, err := w.ad.OpenDM(ctx, alice)
		if err != nil || dm != (bot.Thread{Platform: Platform, Channel: dmOf(alice)}) {
			t.Fatalf("OpenDM: %+v %v", dm, err)
		}
	}
	opens := w.fake.callsTo("conversations.open")
	if len(opens) != 1 || opens[0].param("users") != alice {
		t.Errorf("conversations.open calls %+v", opens)
	}
	for _, bad := range []string{"", "<@UALICE>", "UALICE,UBOB", "SOPS", botUser} {
		if _, err := w.ad.OpenDM(ctx, bad); err == nil {
			t.Errorf("OpenDM(%q) accepted", bad)
		}
	}
	if n := len(w.fake.callsTo("conversations.open")); n != 1 {
		t.Errorf("a refused user reached conversations.open (%d calls)", n)
	}

	// The pointer: posted in the thread, edited to the outcome.
	ref, err := w.ad.PostPointer(ctx, th, waitingPointer())
	if err != nil {
		t.Fatal(err)
	}
	posts := w.fake.callsTo("chat.postMessage")
	if len(posts) != 1 || ref != CardRef(chanOps, posts[0].TS) || posts[0].param("thread_ts") != mentionTS {
		t.Fatalf("pointer %q posted as %+v", ref, posts)
	}
	if posts[0].param("text") != "Waiting for approval in <#"+chanApprovals+">" || len(cardButtons(t, posts[0])) != 0 {
		t.Errorf("pointer text %q, buttons %v", posts[0].param("text"), cardButtons(t, posts[0]))
	}
	if posts[0].param("unfurl_links") != "false" {
		t.Errorf("the pointer unfurls its link: %v", posts[0].Params)
	}
	if err := w.ad.UpdatePointer(ctx, th, ref, completePointer()); err != nil {
		t.Fatal(err)
	}
	upd := w.fake.callsTo("chat.update")
	if len(upd) != 1 || upd[0].param("channel") != chanOps || upd[0].param("ts") != posts[0].TS || !strings.Contains(blocksText(t, upd[0]), "closed") {
		t.Errorf("pointer update %+v", upd)
	}
	if err := w.ad.UpdatePointer(ctx, th, "nonsense", completePointer()); err == nil {
		t.Error("UpdatePointer accepted a malformed reference")
	}
}

// finderBot finds the card a click was on by its message.
type finderBot struct {
	*stubBot
	card    cardpkg.Card
	message string
}

func (f *finderBot) Interact(ctx context.Context, in bot.Interaction) (bot.Reply, error) {
	return bot.Dispatch(ctx, f, in)
}

func (f *finderBot) ClickedCard(_ context.Context, c bot.Click) (*cardpkg.Card, error) {
	if c.Message != f.message {
		return nil, confirm.ErrNotFound
	}
	cd := f.card
	return &cd, nil
}

// With a bot that finds the card by the clicked message, "Show full
// arguments" and "Deny with reason…" work on a copy away from the
// thread (here a DM), and not on a message that is no card.
func TestCardFinderOnCopies(t *testing.T) {
	card := longArgsCard()
	b := &finderBot{stubBot: newStubBot(), card: card, message: CardRef("DALICE", cardTS)}
	w := newStubWorld(t, ModeHTTP, b)
	ref := card.Calls[1].Ref
	w.deliverInteraction(onMessage(blockAction(alice, "DALICE", "", ActionShowArgs, ref), cardTS))
	w.deliverInteraction(onMessage(blockAction(alice, "DALICE", "", ActionDenyReason, ref), cardTS))
	waitFor(t, "two views", func() bool { return len(w.fake.callsTo("views.open")) == 2 })
	views := w.fake.callsTo("views.open")
	for _, v := range views {
		view := v.JSON["view"].(map[string]any)
		js := string(mustJSON(view))
		switch view["callback_id"] {
		case CallbackShowArgs:
			if !strings.Contains(js, "host-xxxxxxxxxxxxxxxxxxxx-h") {
				t.Errorf("the arguments modal does not hold the arguments: %s", js)
			}
		case CallbackDenyReason:
			if !strings.Contains(js, "You are denying call 2") || !strings.Contains(js, `\"message\":\"DALICE/`+cardTS+`\"`) {
				t.Errorf("the reason modal: %s", js)
			}
		default:
			t.Errorf("view %v", view["callback_id"])
		}
	}
	// Not a card message: no arguments.
	w.deliverInteraction(onMessage(blockAction(mallory, "DMALLORY", "", ActionShowArgs, ref), cardTS))
	w.waitEphemeral(mallory, "no longer waits")
	w.ad.Wait()
	if n := len(w.fake.callsTo("views.open")); n != 2 {
		t.Errorf("%d views", n)
	}
}
