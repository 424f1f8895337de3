package bot

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"unicode"

	"github.com/airlockhq/airlock/confirm"
)

// Typed confirmation: an Allow of a waiting critical call counts only
// with its confirmation phrase typed (Click.Phrase). The phrase is the
// server's: rendered from the call's arguments as they will run (an
// edit's, when Edit… changed them) by its tool's confirm_phrase, or the
// tool's name; nothing in a click chooses it.
var (
	// ErrPhraseRequired: an Allow of a critical call without a phrase (a
	// forged or replayed click that skipped the prompt).
	ErrPhraseRequired = errors.New("this call needs its confirmation phrase typed; nothing changed")
	// ErrWrongPhrase: the phrase typed is not the call's.
	ErrWrongPhrase = errors.New("the phrase you typed doesn't match; nothing changed")
)

// MaxPhraseRunes caps a confirmation phrase; a longer rendering is cut
// (without a mark: what is shown is what is typed).
const MaxPhraseRunes = 60

// needsPhrase reports whether an Allow of call counts only with its
// phrase typed: a critical call waiting for a person.
func needsPhrase(call confirm.Call) bool {
	return call.Risk == confirm.RiskCritical && call.Flagged && call.Decision == confirm.DecisionPending
}

// phraseOf is the phrase an approver types to allow call: its tool's
// confirm_phrase over the arguments it will run with, made inert (see
// inertPhrase), without secrets; the tool's name when the tool sets
// none, it fails, renders empty or would show a secret.
func (b *Bot) phraseOf(call confirm.Call) string {
	name := inertPhrase(call.Tool)
	t, ok := b.cfg.Tools.Get(call.Tool)
	if !ok {
		return name
	}
	cp, ok := t.(interface {
		ConfirmPhrase(json.RawMessage) (string, error)
	})
	if !ok {
		return name
	}
	s, err := cp.ConfirmPhrase(call.RunArgs())
	if err != nil {
		b.log.Warn("confirm phrase", "batch", call.BatchID, "call", call.Key, "tool", call.Tool, "err", err)
		return name
	}
	p := inertPhrase(s)
	if p == "" || b.scrub(p) != p {
		return name
	}
	return p
}

// inertPhrase makes a rendered phrase plain text a person can read and
// type: every control, format (bidi, zero-width) or other invisible
// character is dropped, runs of white space become one space, and it is
// cut to MaxPhraseRunes. Mentions and markup stay characters: renderers
// show the phrase as literal text.
func inertPhrase(s string) string {
	s = strings.Map(func(r rune) rune {
		switch {
		case unicode.IsSpace(r):
			return ' '
		case !unicode.IsGraphic(r) || unicode.Is(unicode.Cf, r):
			return -1
		}
		return r
	}, s)
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > MaxPhraseRunes {
		s = strings.TrimSpace(string(r[:MaxPhraseRunes]))
	}
	return s
}

// phraseMatches compares a typed phrase with the call's, exactly (case
// included) once surrounding white space is trimmed.
func phraseMatches(typed, want string) bool {
	return strings.TrimSpace(typed) == want
}

// checkPhrase refuses an Allow of a critical call whose typed phrase is
// missing or wrong; it is audited like every refused click. It never
// reads the bot's clock: whether the call has expired is the store's to
// say (its conditional UPDATE), and a phrase is checked whenever the call
// as loaded needs one.
func (b *Bot) checkPhrase(ctx context.Context, c Click, t clicked) error {
	if !c.Allow || !needsPhrase(t.call) {
		return nil
	}
	switch {
	case strings.TrimSpace(c.Phrase) == "":
		b.rejectClick(ctx, c, t.conv.ID, t.batch.ID, t.call.Key, "confirmation phrase missing")
		return ErrPhraseRequired
	case !phraseMatches(c.Phrase, b.phraseOf(t.call)):
		b.rejectClick(ctx, c, t.conv.ID, t.batch.ID, t.call.Key, "wrong confirmation phrase")
		return ErrWrongPhrase
	}
	return nil
}

// PhrasePrompt is what a platform asks before an Allow of a critical
// call: type Phrase to allow call Number, Tool. Phrase is inert plain
// text (see inertPhrase); Tool is the tool's name as configured.
type PhrasePrompt struct {
	Ref    string
	Number int
	Tool   string
	Phrase string
}

// Text is the prompt in shared words.
func (p PhrasePrompt) Text() string {
	return "Type " + p.Phrase + " to allow " + p.Tool
}

// PhraseFor says what to prompt for before an Allow of the call c.Ref
// names: needed is false for a call that needs no phrase. It checks the
// click as Decide does (the card message, the revision, who may allow
// the call) first, so a stranger learns nothing; a refused click is
// audited and the error is one for UserMessage.
func (b *Bot) PhraseFor(ctx context.Context, c Click) (PhrasePrompt, bool, error) {
	c.Allow = true
	t, leave, err := b.enterClick(ctx, c, b.resolveClick)
	if err != nil {
		return PhrasePrompt{}, false, err
	}
	defer leave()
	if err := b.checkRevision(ctx, c, t); err != nil {
		return PhrasePrompt{}, false, err
	}
	if err := b.clickRefusal(ctx, t.conv, t.batch, t.call, c); err != nil {
		why := "not an approver (phrase)"
		switch {
		case errors.Is(err, ErrSelfApproval):
			why = "self-approval (phrase)"
		case errors.Is(err, ErrStepUp):
			why = "step-up needed (phrase)"
		}
		b.rejectClick(ctx, c, t.conv.ID, t.batch.ID, t.call.Key, why)
		return PhrasePrompt{}, false, err
	}
	if t.call.Decision != confirm.DecisionPending || b.now().After(t.call.ExpiresAt) {
		b.rejectClick(ctx, c, t.conv.ID, t.batch.ID, t.call.Key, "call no longer pending (phrase)")
		return PhrasePrompt{}, false, ErrAlreadyClosed
	}
	if !needsPhrase(t.call) {
		return PhrasePrompt{}, false, nil
	}
	return PhrasePrompt{Ref: c.Ref, Number: t.call.Position + 1, Tool: t.call.Tool, Phrase: b.phraseOf(t.call)}, true, nil
}
