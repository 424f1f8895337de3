package bot_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
)

// buttonsSpy records which of the core's answers Dispatch asked for, and
// with what click.
type buttonsSpy struct {
	method string
	click  bot.Click
	args   string
	kind   card.ActionKind
	card   *card.Card
	needed bool
}

func (s *buttonsSpy) rec(m string, c bot.Click) { s.method, s.click = m, c }
func (s *buttonsSpy) Decide(_ context.Context, c bot.Click) error {
	s.rec("Decide", c)
	return nil
}
func (s *buttonsSpy) DecideAll(_ context.Context, c bot.Click) (bot.AllResult, error) {
	s.rec("DecideAll", c)
	return bot.AllResult{Allow: c.Allow, Decided: 2}, nil
}
func (s *buttonsSpy) Revoke(_ context.Context, c bot.Click) error { s.rec("Revoke", c); return nil }
func (s *buttonsSpy) Extend(_ context.Context, c bot.Click) error { s.rec("Extend", c); return nil }
func (s *buttonsSpy) MarkChecked(_ context.Context, c bot.Click) error {
	s.rec("MarkChecked", c)
	return nil
}
func (s *buttonsSpy) RunAction(_ context.Context, c bot.Click, k card.ActionKind) error {
	s.rec("RunAction", c)
	s.kind = k
	return nil
}
func (s *buttonsSpy) ClickedCard(_ context.Context, c bot.Click) (*card.Card, error) {
	s.rec("ClickedCard", c)
	return s.card, nil
}
func (s *buttonsSpy) PhraseFor(_ context.Context, c bot.Click) (bot.PhrasePrompt, bool, error) {
	s.rec("PhraseFor", c)
	return bot.PhrasePrompt{Ref: c.Ref, Number: 1, Tool: "deploy", Phrase: "prod/api"}, s.needed, nil
}
func (s *buttonsSpy) EditForm(_ context.Context, c bot.Click) (bot.EditForm, error) {
	s.rec("EditForm", c)
	return bot.EditForm{Ref: c.Ref, Number: 1, Tool: "deploy", Args: "{}"}, nil
}
func (s *buttonsSpy) Edit(_ context.Context, c bot.Click, args string) error {
	s.rec("Edit", c)
	s.args = args
	return nil
}

func (s *buttonsSpy) QuestionForm(_ context.Context, c bot.Click) (card.QuestionNotice, error) {
	s.rec("QuestionForm", c)
	return card.QuestionNotice{Ref: c.Ref, Server: "deploy", Fields: []confirm.QuestionField{{Name: "env", Type: "string"}}}, nil
}
func (s *buttonsSpy) AnswerQuestion(_ context.Context, c bot.Click, values []string) error {
	s.rec("AnswerQuestion", c)
	s.args = strings.Join(values, "|")
	return nil
}
func (s *buttonsSpy) DeclineQuestion(_ context.Context, c bot.Click) error {
	s.rec("DeclineQuestion", c)
	return nil
}

var _ bot.Buttons = (*buttonsSpy)(nil)

// Every kind of button card lists has its answer in the core (a kind
// added to card without one fails here), and each asks the core for
// what its button means: the decision, the grant, the reason, the
// edited arguments or the typed phrase the interaction carries.
func TestDispatchAnswersEveryKind(t *testing.T) {
	ref := confirm.Ref("abc123", 0)
	want := map[card.ActionKind]string{
		card.ActAllow: "Decide allow", card.ActAllowGrant: "Decide allow grant", card.ActDeny: "Decide deny",
		card.ActDenyReason: "ClickedCard", card.ActEdit: "EditForm", card.ActShowArgs: "ClickedCard",
		card.ActChecked: "MarkChecked", card.ActExtend: "Extend", card.ActRunStop: "RunAction",
		card.ActRunMarkDone: "RunAction", card.ActRunRetry: "RunAction", card.ActAllowAll: "DecideAll allow",
		card.ActDenyAll: "DecideAll deny", card.ActAllowTyped: "PhraseFor", card.ActShowPreview: "ClickedCard",
		card.ActRevoke: "Revoke", card.ActAnswer: "QuestionForm", card.ActDecline: "DeclineQuestion",
	}
	submitted := map[card.ActionKind]string{
		card.ActDenyReason: "Decide deny", card.ActEdit: "Edit", card.ActAllowTyped: "Decide allow",
		card.ActAnswer: "AnswerQuestion",
	}
	describe := func(s *buttonsSpy) string {
		d := s.method
		if s.method == "Decide" || s.method == "DecideAll" {
			d += map[bool]string{true: " allow", false: " deny"}[s.click.Allow]
		}
		if s.click.Grant {
			d += " grant"
		}
		return d
	}
	for _, b := range card.Buttons() {
		for _, submit := range []bool{false, true} {
			if submit && !b.Submits {
				continue
			}
			s := &buttonsSpy{needed: true}
			in := bot.Interaction{Platform: "test", User: "alice", Channel: "C1", Message: "m1", Kind: b.Kind, Ref: ref,
				Submit: submit, Value: "prod/api"}
			r, err := bot.Dispatch(context.Background(), s, in)
			if errors.Is(err, bot.ErrNoAnswer) {
				t.Errorf("%s (submitted %v): the core has no answer", b.Name, submit)
				continue
			}
			if err != nil {
				t.Errorf("%s (submitted %v): %v", b.Name, submit, err)
				continue
			}
			w := want[b.Kind]
			if submit {
				w = submitted[b.Kind]
			}
			if got := describe(s); got != w {
				t.Errorf("%s (submitted %v) asked %q, want %q", b.Name, submit, got, w)
			}
			if s.click.User != "alice" || s.click.Message != "m1" || s.click.Ref != ref || s.click.Channel != "C1" {
				t.Errorf("%s: the core got click %+v", b.Name, s.click)
			}
			switch {
			case b.Opens && !submit && r.Form == nil:
				t.Errorf("%s opens no form: %+v", b.Name, r)
			case (!b.Opens || submit) && r.Form != nil:
				t.Errorf("%s (submitted %v) opens a form: %+v", b.Name, submit, r.Form)
			case r.Form != nil && (r.Form.Kind != b.Kind || r.Form.Ref != ref || (r.Form.Number != 1 && b.Kind != card.ActAnswer)):
				t.Errorf("%s: form %+v", b.Name, r.Form)
			}
		}
	}
	// What the forms' submissions carry reaches the core.
	s := &buttonsSpy{}
	if _, err := bot.Dispatch(context.Background(), s, bot.Interaction{Kind: card.ActDenyReason, Ref: ref, Submit: true, Value: "not today"}); err != nil || s.click.Reason != "not today" {
		t.Errorf("reason: %v %+v", err, s.click)
	}
	if _, err := bot.Dispatch(context.Background(), s, bot.Interaction{Kind: card.ActEdit, Ref: ref, Submit: true, Value: `{"n":2}`}); err != nil || s.args != `{"n":2}` {
		t.Errorf("edit: %v %q", err, s.args)
	}
	if _, err := bot.Dispatch(context.Background(), s, bot.Interaction{Kind: card.ActAnswer, Ref: confirm.QuestionRef("q1"), Submit: true, Values: []string{"prod", "3"}}); err != nil || s.args != "prod|3" {
		t.Errorf("answer: %v %q", err, s.args)
	}
	if _, err := bot.Dispatch(context.Background(), s, bot.Interaction{Kind: card.ActAllowTyped, Ref: ref, Submit: true, Value: " prod/api "}); err != nil || s.click.Phrase != " prod/api " {
		t.Errorf("phrase: %v %+v", err, s.click)
	}
	if _, err := bot.Dispatch(context.Background(), s, bot.Interaction{Kind: card.ActRunRetry, Ref: confirm.RunRef("r1")}); err != nil || s.kind != card.ActRunRetry {
		t.Errorf("run: %v %s", err, s.kind)
	}
	// Allow… of a call that asks no phrase is a plain Allow, worked next.
	r, err := bot.Dispatch(context.Background(), &buttonsSpy{}, bot.Interaction{Kind: card.ActAllowTyped, Ref: ref, User: "alice"})
	if err != nil || r.Form != nil || r.Then == nil || r.Then.Kind != card.ActAllow || r.Then.Ref != ref || r.Then.User != "alice" {
		t.Errorf("Allow… without a phrase: %+v %v", r, err)
	}
}

// A value that is no kind of button, or a submission of a button that
// opens no form, is refused as an unknown button, and changes nothing.
func TestInteractRefusesAnUnknownButton(t *testing.T) {
	h := newHarness(t, "")
	h.push(calls(tc("", "deploy", `{"svc":"api"}`)), text("done"))
	h.turn("bob", "deploy api")
	c := h.plat.LastCard().Calls[0]
	ctx := context.Background()
	for _, in := range []bot.Interaction{
		{Kind: 0},
		{Kind: card.ActDecline + 1},
		{Kind: 200},
		{Kind: card.ActAllow, Submit: true},
		{Kind: card.ActShowArgs, Submit: true},
	} {
		in.Platform, in.Channel, in.User, in.Ref, in.Message = "test", "C1", "alice", c.Ref, cardMsg(c.Ref)
		r, err := h.bot.Interact(ctx, in)
		if !errors.Is(err, confirm.ErrBadRef) || r != (bot.Reply{}) {
			t.Errorf("kind %d submitted %v: %+v, %v", uint8(in.Kind), in.Submit, r, err)
		}
		if msg := bot.UserMessage(err); !strings.Contains(msg, "Nothing changed.") {
			t.Errorf("kind %d: told %q", uint8(in.Kind), msg)
		}
	}
	if n := h.tools["deploy"].Runs.Load(); n != 0 || !h.plat.LastCard().Calls[0].Open() {
		t.Fatalf("an unknown button changed something: %d runs, card %+v", n, h.plat.LastCard().Calls[0].State)
	}
	if why := rejectedWhy(t, h, "alice"); len(why) != 0 {
		t.Errorf("an unknown button reached the core's checks: %v", why)
	}
}

// Through Interact, the real core: Deny with reason… opens the reason
// form showing the call, its submission denies with the reason; Allow
// allows and runs the call; Show full arguments on a decided card shows
// nothing.
func TestInteractDecidesThroughTheCore(t *testing.T) {
	h := newHarness(t, "")
	h.push(calls(tc("a", "deploy", `{"n":1}`), tc("b", "deploy", `{"n":2}`)), text("done"))
	h.turn("bob", "deploy twice")
	cd := h.plat.LastCard()
	ctx := context.Background()
	at := func(k card.ActionKind, n int) bot.Interaction {
		return bot.Interaction{Platform: "test", Channel: "C1", User: "alice", Kind: k, Ref: cd.Calls[n-1].Ref, Message: cardMsg(cd.Calls[n-1].Ref)}
	}
	r, err := h.bot.Interact(ctx, at(card.ActDenyReason, 2))
	if err != nil || r.Form == nil || r.Form.Call == nil || r.Form.Call.Number != 2 || r.Form.Number != 2 {
		t.Fatalf("Deny with reason…: %+v %v", r, err)
	}
	deny := at(card.ActDenyReason, 2)
	deny.Submit, deny.Value = true, "not this one"
	if _, err := h.bot.Interact(ctx, deny); err != nil {
		t.Fatalf("the reason's submission: %v", err)
	}
	if _, err := h.bot.Interact(ctx, at(card.ActDenyReason, 2)); !errors.Is(err, bot.ErrAlreadyClosed) {
		t.Fatalf("Deny with reason… on a decided call: %v", err)
	}
	if _, err := h.bot.Interact(ctx, at(card.ActAllow, 1)); err != nil {
		t.Fatalf("Allow: %v", err)
	}
	if n := h.tools["deploy"].Runs.Load(); n != 1 {
		t.Fatalf("runs: %d", n)
	}
	if st := h.plat.LastCard().Calls[1].State; st.Kind != card.Denied || !strings.Contains(st.Reason, "not this one") {
		t.Fatalf("call 2: %+v", st)
	}
	r, err = h.bot.Interact(ctx, at(card.ActShowArgs, 1))
	if err != nil || r.Form == nil || r.Form.Call != nil {
		t.Fatalf("Show full arguments on a decided card: %+v %v", r, err)
	}
}
