// Package shell is the terminal adapter: a person types as a chat user, the
// local user is an approver, and short commands decide the approval cards
// it prints from package card. Nothing the model, a tool or a person wrote
// reaches the terminal raw (package visible escapes it).
package shell

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/airlockhq/airlock/adapters/internal/visible"
	"github.com/airlockhq/airlock/bot"
	cardpkg "github.com/airlockhq/airlock/card"
)

// Platform is the name of this platform in config (`channels[].platform`).
const Platform = "shell"

// Defaults for the one local conversation.
const (
	DefaultUser    = "local"
	DefaultChannel = "terminal"
	DefaultThread  = "main"
)

// Bot is what the shell needs from the bot: a typed line's turn, the
// interactions its commands stand for (each the click of a card's
// button: see interact), and the waiting cards and unchecked runs the
// commands read.
type Bot interface {
	HandleTurn(ctx context.Context, t bot.Turn) error
	Interact(ctx context.Context, in bot.Interaction) (bot.Reply, error)
	PendingCard(ctx context.Context, th bot.Thread) (*cardpkg.Card, error)
	// PendingCards are every waiting card of the thread, oldest first.
	PendingCards(ctx context.Context, th bot.Thread) ([]cardpkg.Card, error)
	UncheckedRuns(ctx context.Context, th bot.Thread) ([]cardpkg.UnknownNotice, error)
}

var _ Bot = (*bot.Bot)(nil)

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
			fmt.Fprintf(s.Out, "%s [%d] %s: %s %s — %s\n", req, c.Number, oneLine(c.Tool), line(c.Edited.Line(len(changes))), strings.Join(changes, ", "), oneLine(c.Summary))
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
			fmt.Fprintf(s.Out, "%s [%d]: %s\n", req, c.Number, checkHint())
		}
	}
	if l, ok := card.Extension(); ok && !prev.extended {
		fmt.Fprintf(s.Out, "%s: %s\n", req, line(l))
	}
	for i, e := range card.Escalations {
		if e.Fired && (i >= len(prev.fired) || !prev.fired[i]) {
			fmt.Fprintf(s.Out, "%s: %s\n", req, line(e.Line()))
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

// whyAsked says why a person is asked about an open call and how many
// must allow it (card.Call.Gate), when that is more than the tool's own
// flag asking one person.
func whyAsked(c cardpkg.Call) string {
	if !c.Flagged || !c.Open() || c.PlainGate() {
		return ""
	}
	return c.Gate()
}

// Render formats a card as plain text. Every text from the model, a tool
// or a person is shown with its controls and invisible characters
// escaped.
func Render(c cardpkg.Card) string {
	var w strings.Builder
	fmt.Fprintf(&w, "+-- %s\n", strings.ToUpper(c.Title()))
	if l := c.CopyNote(); len(l.Parts) > 0 {
		fmt.Fprintf(&w, "| %s\n", line(l))
	}
	fmt.Fprintf(&w, "| %s\n", line(c.Lead()))
	if label, said := c.Said(); said != "" {
		fmt.Fprintf(&w, "| %s %s\n", label, oneLine(said))
	}
	editable := false
	for _, call := range c.Calls {
		fmt.Fprintf(&w, "| [%d] %s: %s\n", call.Number, oneLine(call.Tool), oneLine(call.Summary))
		if why := whyAsked(call); why != "" {
			fmt.Fprintf(&w, "|     %s\n", oneLine(why))
		}
		if d := call.Deciders(); len(d.Parts) > 0 && call.Open() {
			fmt.Fprintf(&w, "|     %s\n", line(d))
		}
		if e := call.Edited; e != nil {
			changes, more := changeLines(e)
			fmt.Fprintf(&w, "|     %s\n", line(e.Line(len(changes))))
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
			fmt.Fprintf(&w, "|       %s\n", line(cardpkg.ArgsCut(hidden, call.Open(), call.Number)))
		}
		previewLines(&w, call, "|  ")
		fmt.Fprintf(&w, "|     -> %s\n", oneLine(call.Outcome()))
		if cover := covers(c, call); cover != "" {
			fmt.Fprintf(&w, "|     %s\n", cover)
		}
		if call.Check != nil && !call.Check.Done() {
			fmt.Fprintf(&w, "|     %s\n", checkHint())
		}
		if call.Open() && call.Editable {
			editable = true
			fmt.Fprintf(&w, "|     /edit %d: %s\n", call.Number, editLabel(c, call))
		}
	}
	for _, l := range c.Schedule(len(c.Escalations)) {
		fmt.Fprintf(&w, "| %s\n", line(l))
	}
	var pieces []string
	for _, l := range c.Footer() {
		pieces = append(pieces, line(l))
	}
	fmt.Fprintf(&w, "| %s\n", strings.Join(pieces, " · "))
	if c.Complete() {
		fmt.Fprintf(&w, "+--\n")
		return w.String()
	}
	ext, extendable := c.ExtendAction()
	if extendable {
		fmt.Fprintf(&w, "| /extend: %s\n", ext.A11yLabel)
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
			return lines, cardpkg.MoreChanges(len(e.Changes) - i)
		}
		lines = append(lines, change(ch))
	}
	return lines, ""
}

// change is one changed key of an edit (card.Change.Parts): `key: before
// → after`, escaped. The values are JSON (a string is quoted); a key that
// is not a plain name is quoted too, so neither can pass for more of the
// line.
func change(ch cardpkg.Change) string {
	return ch.Format(func(key string) string {
		key = cardpkg.Excerpt(key, maxChangeChars)
		if !plainKey.MatchString(key) {
			key = strconv.Quote(key)
		}
		return oneLine(key)
	}, func(v string) string {
		return oneLine(cardpkg.Excerpt(v, maxChangeChars))
	})
}

var plainKey = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// editLabel is what /edit N does to call, in the card's words (its Edit…
// button's accessibility label).
func editLabel(c cardpkg.Card, call cardpkg.Call) string {
	for _, a := range c.Actions(call, nil) {
		if a.Kind == cardpkg.ActEdit {
			return a.A11yLabel
		}
	}
	return ""
}

// line is a line of the card's parts as the terminal shows it: plain
// text (card.PlainText) on one line, hidden characters shown escaped; a
// button named in it is the command that does what it does.
func line(l cardpkg.Line) string {
	var b strings.Builder
	for _, p := range l.Parts {
		if cmd, ok := commands[p.Act]; ok && p.Kind == cardpkg.Control {
			fmt.Fprintf(&b, "%s %d", cmd, p.N)
			continue
		}
		b.WriteString(cardpkg.PlainText([]cardpkg.Part{p}))
	}
	return oneLine(b.String())
}

// commands are the terminal's commands for the card's buttons a line
// may name, each taking the call's number.
var commands = map[cardpkg.ActionKind]string{cardpkg.ActShowArgs: "/args", cardpkg.ActShowPreview: "/preview"}

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
