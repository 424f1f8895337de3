package shell

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/airlockhq/airlock/adapters/internal/visible"
	"github.com/airlockhq/airlock/bot"
	cardpkg "github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
)

// The terminal's codec: each command that stands for a card's button
// (/allow, /deny, /edit, /extend, /checked) is the click of that button,
// handed to the core as an interaction (see interact); the others read
// what the terminal printed (/args, /preview, /card, /checked) or start a
// turn (a line, /run, /runbooks, /stop).

func (s *Shell) handle(ctx context.Context, b Bot, line string) (quit bool) {
	if !strings.HasPrefix(line, "/") {
		if err := b.HandleTurn(ctx, bot.Turn{Platform: Platform, Channel: s.Channel, Thread: s.Thread, User: s.User, Text: line}); err != nil {
			s.printf("error: %v\n", err)
		}
		return false
	}
	cmd, rest, _ := strings.Cut(line, " ")
	rest = strings.TrimSpace(rest)
	switch cmd {
	case "/help":
		s.printf("%s", Help)
	case "/quit", "/exit":
		return true
	case "/card":
		s.showCards(ctx, b)
	case "/allow", "/deny":
		s.decide(ctx, b, cmd == "/allow", rest)
	case "/args":
		s.args(ctx, b, rest)
	case "/preview":
		s.showPreview(ctx, b, rest)
	case "/edit":
		s.edit(ctx, b, rest)
	case "/extend":
		s.extend(ctx, b, rest)
	case "/checked":
		s.checked(ctx, b, rest)
	case "/run", "/runbooks", "/stop":
		// Runbook commands: answered by the bot without the model.
		text := strings.TrimSpace(strings.TrimPrefix(cmd, "/") + " " + rest)
		if err := b.HandleTurn(ctx, bot.Turn{Platform: Platform, Channel: s.Channel, Thread: s.Thread, User: s.User, Text: text, Command: true}); err != nil {
			s.printf("error: %v\n", err)
		}
	default:
		s.printf("Unknown command %s. /help lists the commands.\n", cmd)
	}
	return false
}

// showCards prints every waiting card, oldest first, and which one the
// commands act on when there are several.
func (s *Shell) showCards(ctx context.Context, b Bot) {
	cards, err := b.PendingCards(ctx, s.thread())
	switch {
	case errors.Is(err, confirm.ErrNotFound):
		s.printf("No card is waiting.\n")
		return
	case err != nil:
		s.printf("error: %v\n", err)
		return
	}
	if len(cards) > 1 {
		s.printf("%d cards are waiting, oldest first; %s\n", len(cards), actsOnNewest(cards))
	}
	for _, c := range cards {
		s.printCard(c)
	}
}

// actsOnNewest says which of several waiting cards the commands decide.
func actsOnNewest(cards []cardpkg.Card) string {
	return "/allow, /deny, /args, /edit and /extend act on the newest (request " + short(cards[len(cards)-1].BatchID) +
		"), the next one once it is decided; /stop RUN stops a run and denies its waiting step."
}

// pendingCard returns the thread's waiting card; false, with the reason
// printed, when none waits or it could not be loaded.
func (s *Shell) pendingCard(ctx context.Context, b Bot) (*cardpkg.Card, bool) {
	card, err := b.PendingCard(ctx, s.thread())
	switch {
	case errors.Is(err, confirm.ErrNotFound):
		s.printf("No card is waiting.\n")
		return nil, false
	case err != nil:
		s.printf("error: %v\n", err)
		return nil, false
	}
	return card, true
}

// decide parses "N [N...]", "all", or for deny "N reason..." / "all reason...".
func (s *Shell) decide(ctx context.Context, b Bot, allow bool, args string) {
	card, ok := s.pendingCard(ctx, b)
	if !ok {
		return
	}
	fields := strings.Fields(args)
	if len(fields) == 0 {
		s.printf("Which call? For example: /allow 1, /deny 2 not today, /allow all\n")
		return
	}
	var targets []cardpkg.Call
	reason := ""
	if fields[0] == "all" {
		reason = strings.TrimSpace(strings.TrimPrefix(args, "all"))
		if allow && reason != "" {
			s.printf("/allow takes call numbers only.\n")
			return
		}
		// Every waiting call the local user may decide alone, in one
		// transaction (as Slack's and Discord's Allow all).
		kind := cardpkg.ActDenyAll
		if allow {
			kind = cardpkg.ActAllowAll
		}
		r, err := s.interact(ctx, b, s.click(card.BatchID, kind, card.AllRef, reason))
		if err != nil {
			s.printf("%s\n", bot.UserMessage(err))
			return
		}
		s.printf("%s\n", oneLine(r.Notice))
		return
	} else {
		numbers := fields
		if !allow { // /deny N reason...
			numbers = fields[:1]
			reason = strings.TrimSpace(strings.TrimPrefix(args, fields[0]))
		}
		for _, f := range numbers {
			n, err := strconv.Atoi(f)
			if err != nil || n < 1 || n > len(card.Calls) {
				s.printf("%q is not a call number of the card (1-%d).\n", f, len(card.Calls))
				return
			}
			targets = append(targets, card.Calls[n-1])
		}
	}
	if allow && reason != "" {
		s.printf("/allow takes call numbers only.\n")
		return
	}
	for _, c := range targets {
		if !c.Open() {
			s.printf("Call %d is not waiting for a decision (%s).\n", c.Number, oneLine(c.Outcome()))
			continue
		}
		kind := cardpkg.ActDeny
		switch {
		case allow && cardpkg.Offers(card.Actions(c, nil), cardpkg.ActAllowTyped):
			kind = cardpkg.ActAllowTyped
		case allow:
			kind = cardpkg.ActAllow
		}
		in := s.click(card.BatchID, kind, c.Ref, reason)
		r, err := s.interact(ctx, b, in)
		if err == nil && r.Form != nil { // Allow…: the phrase, asked here
			phrase, ok := s.askPhrase(ctx, r.Form.Phrase, c.Number)
			if !ok {
				continue
			}
			in.Submit, in.Value = true, phrase
			_, err = s.interact(ctx, b, in)
		}
		if err != nil {
			s.printf("Call %d: %s\n", c.Number, bot.UserMessage(err))
		}
	}
}

// askPhrase asks for a critical call's confirmation phrase (the form
// the bot answered Allow… with) and reads the next line as the answer;
// false, with the reason printed, when no line came.
func (s *Shell) askPhrase(ctx context.Context, p bot.PhrasePrompt, n int) (string, bool) {
	s.printf("%s: ", line(cardpkg.PhraseForm(n, p.Tool, p.Phrase).About))
	var line string
	var ok bool
	if s.lines != nil {
		select {
		case line, ok = <-s.lines:
		case <-ctx.Done():
		}
	}
	if !ok {
		s.printf("\nCall %d: %s\n", n, cardpkg.NoPhrase)
		return "", false
	}
	if strings.TrimSpace(line) == "" {
		s.printf("Call %d: %s\n", n, cardpkg.NoPhrase)
		return "", false
	}
	return line, true
}

// click is what a command stands for: the local user's click on a
// button of kind on the card (or the unknown outcome's line) the shell
// printed, whose reference PostCard returned (the batch id); value is
// what the command typed (a reason).
func (s *Shell) click(message string, kind cardpkg.ActionKind, ref, value string) bot.Interaction {
	return bot.Interaction{Platform: Platform, Channel: s.Channel, Thread: s.Thread, Message: message, User: s.User,
		Kind: kind, Ref: ref, Value: value}
}

// interact hands the bot a command's click, and works the click it says
// to work next (an Allow… that asks no phrase is a plain Allow).
func (s *Shell) interact(ctx context.Context, b Bot, in bot.Interaction) (bot.Reply, error) {
	r, err := b.Interact(ctx, in)
	if err == nil && r.Then != nil {
		return s.interact(ctx, b, *r.Then)
	}
	return r, err
}

// clickProblem is what the person is told when the bot refused a click;
// an edit's refusal says why in the bot's words (which may quote the
// arguments, so they print escaped).
func clickProblem(err error) string {
	var ee *bot.EditError
	if errors.As(err, &ee) {
		return "edit refused: " + visible.Reveal(strings.TrimSpace(ee.Message)) + ". Nothing changed."
	}
	return bot.UserMessage(err)
}

// EditUsage explains /edit.
const EditUsage = `Usage: /edit N {"key": "value", ...} allows call N with these arguments instead (JSON on one line; the tool and the rules check them again). /edit N alone shows its arguments.`

// edit handles "/edit N" (show the call's arguments) and "/edit N JSON"
// (allow it with those arguments). Anything else prints the usage and
// asks nothing of the bot.
func (s *Shell) edit(ctx context.Context, b Bot, rest string) {
	card, ok := s.pendingCard(ctx, b)
	if !ok {
		return
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		s.printf("%s\n", EditUsage)
		return
	}
	n, err := strconv.Atoi(fields[0])
	if err != nil || n < 1 || n > len(card.Calls) {
		s.printf("%q is not a call number of the card (1-%d).\n%s\n", visible.Reveal(fields[0]), len(card.Calls), EditUsage)
		return
	}
	args := strings.TrimSpace(strings.TrimPrefix(rest, fields[0]))
	c := card.Calls[n-1]
	if !c.Open() {
		s.printf("Call %d is not waiting for a decision (%s).\n", c.Number, oneLine(c.Outcome()))
		return
	}
	if !c.Editable {
		s.printf("Call %d's arguments can't be edited here; /allow or /deny it.\n", c.Number)
		return
	}
	in := s.click(card.BatchID, cardpkg.ActEdit, c.Ref, "")
	if args == "" {
		r, err := s.interact(ctx, b, in)
		if err != nil {
			s.printf("Call %d: %s\n", c.Number, clickProblem(err))
			return
		}
		if r.Form != nil {
			s.printEditForm(r.Form.Edit)
		}
		return
	}
	in.Submit, in.Value = true, args
	if _, err := s.interact(ctx, b, in); err != nil {
		s.printf("Call %d: %s\n", c.Number, clickProblem(err))
	}
}

// maxEditLine bounds the ready-to-type /edit line the form prints.
const maxEditLine = ArgsPreviewChars

// printEditForm prints a call's current arguments, whole and escaped,
// and the /edit line that would keep them, to copy and change.
func (s *Shell) printEditForm(f bot.EditForm) {
	var w strings.Builder
	form := cardpkg.EditForm(f.Number, f.Tool, f.Summary, "", f.Holds)
	fmt.Fprintf(&w, "%s: %s\n%s\n%s\n", line(form.About), oneLine(form.Quote), line(form.Note), visible.Reveal(strings.TrimSpace(f.Args)))
	// Escaping first makes raw controls in strings valid JSON escapes
	// of the same characters: the line is the exact arguments.
	var compact bytes.Buffer
	if json.Compact(&compact, []byte(visible.Reveal(f.Args))) == nil {
		line := compact.String()
		if utf8.RuneCountInString(line) <= maxEditLine {
			fmt.Fprintf(&w, "To allow it with other arguments, type this line with your changes:\n/edit %d %s\n", f.Number, line)
		} else {
			fmt.Fprintf(&w, "To allow it with other arguments, type /edit %d and the whole JSON on one line.\n", f.Number)
		}
	}
	w.WriteString(EditUsage + "\n")
	s.printf("%s", w.String())
}

// extend pushes the waiting card's deadline.
func (s *Shell) extend(ctx context.Context, b Bot, rest string) {
	if rest != "" {
		s.printf("/extend takes nothing after it.\n")
		return
	}
	card, ok := s.pendingCard(ctx, b)
	if !ok {
		return
	}
	if e := card.Extended; e != nil {
		s.printf("This card was already extended by %s; it expires at %s.\n", oneLine(e.By), card.ExpiresAt.UTC().Format("15:04:05 UTC"))
		return
	}
	if card.ExtendRef == "" {
		s.printf("This card can't be extended.\n")
		return
	}
	if _, err := s.interact(ctx, b, s.click(card.BatchID, cardpkg.ActExtend, card.ExtendRef, "")); err != nil {
		s.printf("%s\n", clickProblem(err))
	}
}

// args prints the whole arguments of a call of the waiting card.
func (s *Shell) args(ctx context.Context, b Bot, arg string) {
	c, ok := s.pendingCall(ctx, b, arg)
	if !ok {
		return
	}
	s.printf("%s:\n%s\n", line(cardpkg.ArgsView(c).Head), visible.Reveal(strings.TrimSpace(c.Args)))
}

// pendingCall is the call numbered arg of the waiting card; false (and
// the person told why) when there is none.
func (s *Shell) pendingCall(ctx context.Context, b Bot, arg string) (cardpkg.Call, bool) {
	cd, ok := s.pendingCard(ctx, b)
	if !ok {
		return cardpkg.Call{}, false
	}
	n, err := strconv.Atoi(strings.TrimSpace(arg))
	if err != nil || n < 1 || n > len(cd.Calls) {
		s.printf("%q is not a call number of the card (1-%d).\n", visible.Reveal(arg), len(cd.Calls))
		return cardpkg.Call{}, false
	}
	return cd.Calls[n-1], true
}

// CheckedUsage explains /checked.
const CheckedUsage = "Usage: /checked lists runs whose outcome is unknown; /checked N marks run N checked once you know whether it took effect."

// checked handles "/checked" (list) and "/checked N" (mark run N).
func (s *Shell) checked(ctx context.Context, b Bot, rest string) {
	runs, err := b.UncheckedRuns(ctx, s.thread())
	if err != nil {
		s.printf("error: %v\n", err)
		return
	}
	if rest == "" {
		if len(runs) == 0 {
			s.printf("No run with an unknown outcome waits to be checked.\n")
			return
		}
		var w strings.Builder
		w.WriteString("Runs whose outcome is unknown (each gates its tool until checked):\n")
		for i, n := range runs {
			batchID, _, _ := confirm.ParseCheckedRef(n.Check.Ref)
			fmt.Fprintf(&w, "  %d. request %s, call %d: %s: %s\n", i+1, short(batchID), n.Number, oneLine(n.Tool), oneLine(n.Summary))
		}
		w.WriteString(CheckedUsage + "\n")
		s.printf("%s", w.String())
		return
	}
	k, err := strconv.Atoi(rest)
	if err != nil || k < 1 || k > len(runs) || strconv.Itoa(k) != rest {
		if len(runs) == 0 {
			s.printf("No run with an unknown outcome waits to be checked.\n")
			return
		}
		s.printf("%q is not a run number (1-%d); /checked lists them.\n", oneLine(rest), len(runs))
		return
	}
	n := runs[k-1]
	batchID, _, err := confirm.ParseCheckedRef(n.Check.Ref)
	if err != nil {
		s.printf("%s\n", bot.UserMessage(err))
		return
	}
	if _, err := s.interact(ctx, b, s.click(batchID, cardpkg.ActChecked, n.Check.Ref, "")); err != nil {
		s.printf("%s\n", clickProblem(err))
		return
	}
	s.printf("Marked checked: call %d (%s) of request %s.\n", n.Number, oneLine(n.Tool), short(batchID))
}

// showPreview prints the whole preview of a call of the waiting card.
func (s *Shell) showPreview(ctx context.Context, b Bot, arg string) {
	c, ok := s.pendingCall(ctx, b, arg)
	if !ok {
		return
	}
	v := cardpkg.PreviewView(c)
	if c.Preview == nil || !c.Preview.Shown() {
		s.printf("%s: %s\n", line(v.Head), v.Empty)
		return
	}
	s.printf("%s (%s)\n%s\n", line(v.Head), c.Preview.Heading(), visible.Reveal(strings.TrimRight(c.Preview.Text(), "\n")))
	if n := c.Preview.CutNote(); n != "" {
		s.printf("%s\n", n)
	}
}
