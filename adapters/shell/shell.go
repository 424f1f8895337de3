// Package shell is the terminal adapter: a person types as a chat user, the
// local user is an approver, and short commands decide the approval cards
// it prints from package card. Nothing the model, a tool or a person wrote
// reaches the terminal raw (package visible escapes it).
package shell

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/airlockhq/airlock/adapters/internal/visible"
	"github.com/airlockhq/airlock/bot"
	cardpkg "github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
)

// Platform is the name of this platform in config (`channels[].platform`).
const Platform = "shell"

// Defaults for the one local conversation.
const (
	DefaultUser    = "local"
	DefaultChannel = "terminal"
	DefaultThread  = "main"
)

// Bot is what the shell needs from the bot.
type Bot interface {
	HandleTurn(ctx context.Context, t bot.Turn) error
	Decide(ctx context.Context, c bot.Click) error
	PendingCard(ctx context.Context, th bot.Thread) (*cardpkg.Card, error)
	// PendingCards are every waiting card of the thread, oldest first.
	PendingCards(ctx context.Context, th bot.Thread) ([]cardpkg.Card, error)
	EditForm(ctx context.Context, c bot.Click) (bot.EditForm, error)
	Edit(ctx context.Context, c bot.Click, args string) error
	Extend(ctx context.Context, c bot.Click) error
	MarkChecked(ctx context.Context, c bot.Click) error
	UncheckedRuns(ctx context.Context, th bot.Thread) ([]cardpkg.UnknownNotice, error)
	// DecideAll is /allow all and /deny all: one transaction.
	DecideAll(ctx context.Context, c bot.Click) (bot.AllResult, error)
	// PhraseFor is what /allow N of a critical call asks typed.
	PhraseFor(ctx context.Context, c bot.Click) (bot.PhrasePrompt, bool, error)
}

// Shell reads commands from In and writes the conversation to Out.
type Shell struct {
	In      io.Reader
	Out     io.Writer
	User    string
	Channel string
	Thread  string

	mu      sync.Mutex         // serialises writes to Out
	shown   map[string]printed // batch id -> the card as last printed
	runs    map[string]string  // run id -> its message as last printed
	greeted bool
	lines   <-chan string // the lines Run reads, for a prompt's answer
}

// printed is what the terminal last showed of a card, so an update
// prints only what changed.
type printed struct {
	outcomes []string // per call
	edits    []string // per call: editSig of its edit, "" when not edited
	extended bool
	fired    []bool   // per escalation step
	previews []string // per call: previewSig
}

var _ bot.Platform = (*Shell)(nil)

// New returns a shell on in and out with the default local user.
func New(in io.Reader, out io.Writer) *Shell {
	return &Shell{In: in, Out: out, User: DefaultUser, Channel: DefaultChannel, Thread: DefaultThread}
}

func (s *Shell) thread() bot.Thread {
	return bot.Thread{Platform: Platform, Channel: s.Channel, Thread: s.Thread}
}

func (s *Shell) printf(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(s.Out, format, args...)
}

// Help lists the commands.
const Help = `Type a message to talk to the agent. Commands:
  /allow N [N...]     allow call(s) N of the waiting card
  /allow all          allow every waiting call
  /deny N [reason]    deny call N, optionally telling the agent why
  /deny all [reason]  deny every waiting call
  /args N             print the whole arguments of call N
  /preview N          print the whole preview (dry run) of call N
  /edit N {JSON}      allow call N with these arguments instead (JSON on one line)
  /edit N             show call N's arguments to edit
  /extend             push the waiting card's deadline (once per card)
  /checked            list runs whose outcome is unknown and not yet checked
  /checked N          mark run N checked once you know whether it took effect
                      (until then every call of its tool needs a yes)
  /run NAME k=v ...   start a runbook (values may be quoted: k="a b")
  /runbooks           list the runbooks and their parameters
  /stop [RUN]         stop a runbook run of this conversation (with several
                      going, name it: its id or the start of it)
  /card               show every waiting card again (the commands act on the newest)
  /help               show this help
  /quit               leave (a waiting card stays waiting)
`

// Greet prints the banner; Run does it when nobody did before.
func (s *Shell) Greet() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.greeted {
		fmt.Fprintf(s.Out, "airlock chat: you are %q. /help lists the commands.\n", s.User)
		s.greeted = true
	}
}

// Note prints a line of Airlock's own (not the model's) as Post does.
func (s *Shell) Note(text string) {
	s.printf("airlock: %s\n", visible.RevealProse(text))
}

// Run reads lines until In ends, ctx ends, or /quit.
func (s *Shell) Run(ctx context.Context, b Bot) error {
	s.Greet()
	if cards, err := b.PendingCards(ctx, s.thread()); err == nil {
		if len(cards) == 1 {
			s.printf("A card is still waiting from before:\n")
		} else {
			s.printf("%d cards are still waiting from before, oldest first; %s\n", len(cards), actsOnNewest(cards))
		}
		for _, c := range cards {
			s.printCard(c)
		}
	}
	lines := make(chan string)
	readErr := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(s.In)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
		readErr <- sc.Err()
		close(lines)
	}()
	s.lines = lines
	for {
		s.printf("> ")
		var line string
		select {
		case <-ctx.Done():
			return ctx.Err()
		case l, ok := <-lines:
			if !ok {
				s.printf("\n")
				return <-readErr
			}
			line = strings.TrimSpace(l)
		}
		if line == "" {
			continue
		}
		if quit := s.handle(ctx, b, line); quit {
			return nil
		}
	}
}

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
		res, err := b.DecideAll(ctx, s.click(card, card.AllRef, allow, reason))
		if err != nil {
			s.printf("%s\n", bot.UserMessage(err))
			return
		}
		s.printf("%s\n", oneLine(res.Message()))
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
		click := s.click(card, c.Ref, allow, reason)
		if allow && cardpkg.Offers(card.Actions(c, nil), cardpkg.ActAllowTyped) {
			phrase, ok := s.askPhrase(ctx, b, click, c.Number)
			if !ok {
				continue
			}
			click.Phrase = phrase
		}
		err := b.Decide(ctx, click)
		if err != nil {
			s.printf("Call %d: %s\n", c.Number, bot.UserMessage(err))
		}
	}
}

// askPhrase asks for a critical call's confirmation phrase (bot.PhraseFor)
// and reads the next line as the answer; false, with the reason printed,
// when the bot refused or no line came.
func (s *Shell) askPhrase(ctx context.Context, b Bot, click bot.Click, n int) (string, bool) {
	p, needed, err := b.PhraseFor(ctx, click)
	switch {
	case err != nil:
		s.printf("Call %d: %s\n", n, bot.UserMessage(err))
		return "", false
	case !needed:
		return "", true
	}
	s.printf("Type %s to allow call %d: ", oneLine(p.Phrase), n)
	var line string
	var ok bool
	if s.lines != nil {
		select {
		case line, ok = <-s.lines:
		case <-ctx.Done():
		}
	}
	if !ok {
		s.printf("\nCall %d: no phrase typed; nothing changed.\n", n)
		return "", false
	}
	if strings.TrimSpace(line) == "" {
		s.printf("Call %d: no phrase typed; nothing changed.\n", n)
		return "", false
	}
	return line, true
}

// click is a click of the local user on the card as the shell posted it:
// its Message is the reference PostCard returned (the batch id).
func (s *Shell) click(card *cardpkg.Card, ref string, allow bool, reason string) bot.Click {
	return bot.Click{Platform: Platform, Channel: s.Channel, Message: card.BatchID, User: s.User, Ref: ref, Allow: allow, Reason: reason}
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
	click := s.click(card, c.Ref, false, "")
	if args == "" {
		form, err := b.EditForm(ctx, click)
		if err != nil {
			s.printf("Call %d: %s\n", c.Number, clickProblem(err))
			return
		}
		s.printEditForm(form)
		return
	}
	if err := b.Edit(ctx, click, args); err != nil {
		s.printf("Call %d: %s\n", c.Number, clickProblem(err))
	}
}

// maxEditLine bounds the ready-to-type /edit line the form prints.
const maxEditLine = ArgsPreviewChars

// printEditForm prints a call's current arguments, whole and escaped,
// and the /edit line that would keep them, to copy and change.
func (s *Shell) printEditForm(f bot.EditForm) {
	var w strings.Builder
	fmt.Fprintf(&w, "Arguments of call [%d] %s: %s\n%s\n", f.Number, oneLine(f.Tool), oneLine(f.Summary), visible.Reveal(strings.TrimSpace(f.Args)))
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
	if err := b.Extend(ctx, s.click(card, card.ExtendRef, false, "")); err != nil {
		s.printf("%s\n", clickProblem(err))
	}
}

// args prints the whole arguments of a call of the waiting card.
func (s *Shell) args(ctx context.Context, b Bot, arg string) {
	c, ok := s.pendingCall(ctx, b, arg)
	if !ok {
		return
	}
	s.printf("Arguments of call [%d] %s:\n%s\n", c.Number, visible.Reveal(c.Tool), visible.Reveal(strings.TrimSpace(c.Args)))
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

// PostCard prints a card. Its reference is the batch id: the shell's
// clicks carry it as Click.Message.
func (s *Shell) PostCard(_ context.Context, _ bot.Thread, card cardpkg.Card) (string, error) {
	s.printCard(card)
	return card.BatchID, nil
}

// UpdateCard prints what changed since the card was last printed: calls
// edited or decided, an extension, escalation steps that fired.
func (s *Shell) UpdateCard(_ context.Context, _ bot.Thread, _ string, card cardpkg.Card) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	prev := s.shown[card.BatchID]
	req := "  request " + short(card.BatchID)
	for i, c := range card.Calls {
		if sig := editSig(c.Edited); sig != "" && (i >= len(prev.edits) || prev.edits[i] != sig) {
			changes, more := changeLines(c.Edited)
			if more != "" {
				changes = append(changes, more)
			}
			fmt.Fprintf(s.Out, "%s [%d] %s: edited by %s: %s; now: %s\n", req, c.Number, oneLine(c.Tool), oneLine(c.Edited.By), strings.Join(changes, ", "), oneLine(c.Summary))
		}
		if sig := previewSig(c); sig != "" && (i >= len(prev.previews) || prev.previews[i] != sig) {
			var w strings.Builder
			previewLines(&w, c, "")
			fmt.Fprintf(s.Out, "%s [%d] %s:\n%s", req, c.Number, oneLine(c.Tool), w.String())
		}
		if i < len(prev.outcomes) && prev.outcomes[i] == c.Outcome() {
			continue
		}
		fmt.Fprintf(s.Out, "%s [%d] %s: %s\n", req, c.Number, oneLine(c.Tool), oneLine(c.Outcome()))
		if c.Check != nil && !c.Check.Done() {
			fmt.Fprintf(s.Out, "%s [%d]: %s\n", req, c.Number, checkHint(c.Tool))
		}
	}
	if card.Extended != nil && !prev.extended {
		fmt.Fprintf(s.Out, "%s: %s\n", req, extension(card))
	}
	for i, e := range card.Escalations {
		if e.Fired && (i >= len(prev.fired) || !prev.fired[i]) {
			fmt.Fprintf(s.Out, "%s: %s\n", req, escalation(e))
		}
	}
	s.remember(card)
	return nil
}

// remember records what was printed of a card. The caller holds s.mu.
func (s *Shell) remember(card cardpkg.Card) {
	if s.shown == nil {
		s.shown = map[string]printed{}
	}
	p := printed{
		outcomes: make([]string, len(card.Calls)),
		edits:    make([]string, len(card.Calls)),
		extended: card.Extended != nil,
		fired:    make([]bool, len(card.Escalations)),
		previews: make([]string, len(card.Calls)),
	}
	for i, c := range card.Calls {
		p.outcomes[i] = c.Outcome()
		p.edits[i] = editSig(c.Edited)
		p.previews[i] = previewSig(c)
	}
	for i, e := range card.Escalations {
		p.fired[i] = e.Fired
	}
	s.shown[card.BatchID] = p
}

// editSig tells one edit from another; "" for none.
func editSig(e *cardpkg.Edit) string {
	if e == nil {
		return ""
	}
	b, _ := json.Marshal(e)
	return string(b)
}

// Post prints the bot's message, its controls and bidi characters shown
// escaped.
func (s *Shell) Post(_ context.Context, _ bot.Thread, text string) error {
	s.printf("airlock: %s\n", visible.RevealProse(text))
	return nil
}

func (s *Shell) printCard(c cardpkg.Card) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprint(s.Out, Render(c))
	s.remember(c)
}

// Arguments longer than these are cut on a card; /args N prints them.
const (
	ArgsPreviewLines = 30
	ArgsPreviewChars = 2000
)

// whyAsked says why a person is asked about an open call and how many must
// allow it, when that is more than the tool's own flag asking one person;
// with approvals so far.
func whyAsked(c cardpkg.Call) string {
	if !c.Flagged || !c.Open() {
		return ""
	}
	plain := c.Approvals <= 1 && c.RiskLabel() == ""
	for _, r := range c.Reasons {
		plain = plain && r.Kind == confirm.ReasonToolFlag
	}
	if plain {
		return ""
	}
	why := c.Why()
	if p := c.Progress(); p != "" {
		why += " (" + p + ")"
	}
	return why
}

// Render formats a card as plain text. Every text from the model, a tool
// or a person is shown with its controls and invisible characters
// escaped.
func Render(c cardpkg.Card) string {
	var w strings.Builder
	title := "APPROVAL NEEDED"
	if c.Complete() {
		title = "DECIDED"
	}
	fmt.Fprintf(&w, "+-- %s (request %s, asked by %s)\n", title, short(c.BatchID), oneLine(c.RequestedBy))
	if s := c.Step; s != nil {
		fmt.Fprintf(&w, "| This is %s, started by %s.\n", oneLine(s.Title()), oneLine(s.StartedBy))
	} else if c.Intro != "" {
		fmt.Fprintf(&w, "| The agent says: %s\n", oneLine(c.Intro))
	}
	editable := false
	for _, call := range c.Calls {
		fmt.Fprintf(&w, "| [%d] %s: %s\n", call.Number, oneLine(call.Tool), oneLine(call.Summary))
		if why := whyAsked(call); why != "" {
			fmt.Fprintf(&w, "|     %s\n", oneLine(why))
		}
		if e := call.Edited; e != nil {
			fmt.Fprintf(&w, "|     edited by %s at %s:\n", oneLine(e.By), e.At.UTC().Format("15:04:05 UTC"))
			changes, more := changeLines(e)
			for _, l := range changes {
				fmt.Fprintf(&w, "|       %s\n", l)
			}
			if more != "" {
				fmt.Fprintf(&w, "|       %s\n", more)
			}
		}
		args, hidden := preview(call.Args)
		for _, l := range strings.Split(args, "\n") {
			fmt.Fprintf(&w, "|       %s\n", l)
		}
		if hidden > 0 {
			fmt.Fprintf(&w, "|       … %s", cardpkg.Hidden(hidden))
			if call.Open() {
				fmt.Fprintf(&w, "; /args %d prints them all", call.Number)
			}
			w.WriteString("\n")
		}
		previewLines(&w, call, "|  ")
		fmt.Fprintf(&w, "|     -> %s\n", oneLine(call.Outcome()))
		if cover := covers(c, call); cover != "" {
			fmt.Fprintf(&w, "|     %s\n", cover)
		}
		if call.Check != nil && !call.Check.Done() {
			fmt.Fprintf(&w, "|     %s\n", checkHint(call.Tool))
		}
		if call.Open() && call.Editable {
			editable = true
			fmt.Fprintf(&w, "|     /edit %d shows its arguments to change before allowing\n", call.Number)
		}
	}
	if !c.Complete() {
		approvers := "none configured"
		if !c.Approvers.Empty() {
			approvers = who(c.Approvers)
		}
		fmt.Fprintf(&w, "| Approvers: %s. Expires %s.\n", approvers, c.ExpiresAt.UTC().Format(time.RFC3339))
	}
	if c.Extended != nil {
		fmt.Fprintf(&w, "| %s.\n", capital(extension(c)))
	}
	for _, e := range c.Escalations {
		if e.Fired || !c.Complete() {
			fmt.Fprintf(&w, "| %s\n", capital(escalation(e)))
		}
	}
	if c.Complete() {
		fmt.Fprintf(&w, "+--\n")
		return w.String()
	}
	extendable := c.ExtendRef != "" && c.Extended == nil
	if extendable {
		if c.ExtendBy > 0 {
			fmt.Fprintf(&w, "| /extend pushes the deadline by %s (once per card)\n", cardpkg.Duration(c.ExtendBy))
		} else {
			fmt.Fprintf(&w, "| /extend pushes the deadline (once per card)\n")
		}
	}
	w.WriteString("+-- /allow N  /deny N [reason]  /allow all  /deny all [reason]  /args N")
	if editable {
		w.WriteString("  /edit N")
	}
	if extendable {
		w.WriteString("  /extend")
	}
	w.WriteString("\n")
	return w.String()
}

// A card lists at most this many changed keys of an edited call, each
// value cut to maxChangeChars; /args N prints the whole arguments.
const (
	maxChangesShown = 10
	maxChangeChars  = 120
)

// changeLines are an edit's changed keys as a card lists them, at most
// maxChangesShown, and "… and N more changed keys" when it lists fewer
// than all.
func changeLines(e *cardpkg.Edit) (lines []string, more string) {
	for i, ch := range e.Changes {
		if i == maxChangesShown {
			return lines, fmt.Sprintf("… and %d more changed keys", len(e.Changes)-i)
		}
		lines = append(lines, change(ch))
	}
	return lines, ""
}

// change is one changed key of an edit: `key: before → after`, escaped,
// "(absent)" for a side without the key. The values are JSON (a string
// is quoted); a key that is not a plain name is quoted too, so neither
// can pass for more of the line.
func change(ch cardpkg.Change) string {
	side := func(v string) string {
		if v == "" {
			return "(absent)"
		}
		return oneLine(cardpkg.Excerpt(v, maxChangeChars))
	}
	key := cardpkg.Excerpt(ch.Key, maxChangeChars)
	if !plainKey.MatchString(key) {
		key = strconv.Quote(key)
	}
	return oneLine(key) + ": " + side(ch.Before) + " → " + side(ch.After)
}

var plainKey = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// extension is an Extend, e.g. "extended by U1; now expires at
// 16:35:00 UTC" (while the card waits).
func extension(c cardpkg.Card) string {
	if c.Complete() {
		return fmt.Sprintf("extended by %s at %s", oneLine(c.Extended.By), c.Extended.At.UTC().Format("15:04:05 UTC"))
	}
	return fmt.Sprintf("extended by %s; now expires at %s", oneLine(c.Extended.By), c.ExpiresAt.UTC().Format("15:04:05 UTC"))
}

// escalation is one step, e.g. "escalation at 16:15 UTC: mentions group
// S1, widens approvers to U2 (fired)".
func escalation(e cardpkg.Escalation) string {
	var parts []string
	if !e.Mention.Empty() {
		parts = append(parts, "mentions "+who(e.Mention))
	}
	if !e.Approvers.Empty() {
		parts = append(parts, "widens approvers to "+who(e.Approvers))
	}
	s := "escalation at " + e.At.UTC().Format("15:04 UTC")
	if len(parts) > 0 {
		s += ": " + strings.Join(parts, ", ")
	}
	if e.Fired {
		s += " (fired)"
	}
	return s
}

// who lists people as the terminal shows them: user ids, "group S…",
// "role …", escaped.
func who(a confirm.Approvers) string {
	return oneLine(strings.Join(a.Names(), ", "))
}

func capital(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// preview is the arguments as a card shows them, revealed and cut to
// ArgsPreviewLines lines and ArgsPreviewChars characters, and how many
// of their characters it leaves out.
func preview(args string) (string, int) {
	return visible.Preview(args, ArgsPreviewChars, ArgsPreviewLines)
}

func short(id string) string {
	r := []rune(oneLine(id))
	if len(r) > 8 {
		return string(r[:8])
	}
	return string(r)
}

// oneLine is s on one line, its hidden characters shown escaped.
func oneLine(s string) string { return cardpkg.OneLine(visible.Reveal(s)) }
