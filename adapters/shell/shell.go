// Package shell is the terminal adapter: a person types as a chat user,
// approval cards print with numbered calls and their read-back, and short
// commands decide them. The local user is an approver.
//
// Nothing the model, a tool or a person wrote reaches the terminal raw:
// escape sequences, other controls, bidi controls and invisible format
// characters print as escapes such as \u001b or \u202e (package visible),
// so no text can move the cursor, recolour, clear or reorder the screen.
// Arguments longer than a card shows are cut with a note saying how much
// is hidden; /args N prints them whole.
package shell

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

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
}

// Shell reads commands from In and writes the conversation to Out.
type Shell struct {
	In      io.Reader
	Out     io.Writer
	User    string
	Channel string
	Thread  string

	mu      sync.Mutex          // serialises writes to Out
	shown   map[string][]string // batch id -> outcome per call, as last printed
	greeted bool
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
  /card               show the waiting card again
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

// Run reads lines until In ends, ctx ends, or /quit.
func (s *Shell) Run(ctx context.Context, b Bot) error {
	s.Greet()
	if card, err := b.PendingCard(ctx, s.thread()); err == nil {
		s.printf("A card is still waiting from before:\n")
		s.printCard(*card)
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
		card, err := b.PendingCard(ctx, s.thread())
		if err != nil {
			s.printf("No card is waiting.\n")
			return false
		}
		s.printCard(*card)
	case "/allow", "/deny":
		s.decide(ctx, b, cmd == "/allow", rest)
	case "/args":
		s.args(ctx, b, rest)
	default:
		s.printf("Unknown command %s. /help lists the commands.\n", cmd)
	}
	return false
}

// decide parses "N [N...]", "all", or for deny "N reason..." / "all reason...".
func (s *Shell) decide(ctx context.Context, b Bot, allow bool, args string) {
	card, err := b.PendingCard(ctx, s.thread())
	if errors.Is(err, confirm.ErrNotFound) {
		s.printf("No card is waiting.\n")
		return
	} else if err != nil {
		s.printf("error: %v\n", err)
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
		for _, c := range card.Calls {
			if c.Open() {
				targets = append(targets, c)
			}
		}
		reason = strings.TrimSpace(strings.TrimPrefix(args, "all"))
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
		err := b.Decide(ctx, bot.Click{Platform: Platform, Channel: s.Channel, User: s.User, Ref: c.Ref, Allow: allow, Reason: reason})
		if err != nil {
			s.printf("Call %d: %s\n", c.Number, bot.UserMessage(err))
		}
	}
}

// args prints the whole arguments of a call of the waiting card.
func (s *Shell) args(ctx context.Context, b Bot, arg string) {
	card, err := b.PendingCard(ctx, s.thread())
	if err != nil {
		s.printf("No card is waiting.\n")
		return
	}
	n, err := strconv.Atoi(strings.TrimSpace(arg))
	if err != nil || n < 1 || n > len(card.Calls) {
		s.printf("%q is not a call number of the card (1-%d).\n", visible.Reveal(arg), len(card.Calls))
		return
	}
	c := card.Calls[n-1]
	s.printf("Arguments of call [%d] %s:\n%s\n", c.Number, visible.Reveal(c.Tool), visible.Reveal(strings.TrimSpace(c.Args)))
}

// PostCard prints a card.
func (s *Shell) PostCard(_ context.Context, _ bot.Thread, card cardpkg.Card) (string, error) {
	s.printCard(card)
	return card.BatchID, nil
}

// UpdateCard prints the calls whose state changed since the card was last
// printed.
func (s *Shell) UpdateCard(_ context.Context, _ bot.Thread, _ string, card cardpkg.Card) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	prev := s.shown[card.BatchID]
	for i, c := range card.Calls {
		if i < len(prev) && prev[i] == c.Outcome() {
			continue
		}
		fmt.Fprintf(s.Out, "  request %s [%d] %s: %s\n", short(card.BatchID), c.Number, oneLine(c.Tool), oneLine(c.Outcome()))
	}
	s.remember(card)
	return nil
}

// remember records what was printed of a card. The caller holds s.mu.
func (s *Shell) remember(card cardpkg.Card) {
	if s.shown == nil {
		s.shown = map[string][]string{}
	}
	outcomes := make([]string, len(card.Calls))
	for i, c := range card.Calls {
		outcomes[i] = c.Outcome()
	}
	s.shown[card.BatchID] = outcomes
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
	plain := c.Approvals <= 1
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
	if c.Intro != "" {
		fmt.Fprintf(&w, "| The agent says: %s\n", oneLine(c.Intro))
	}
	for _, call := range c.Calls {
		fmt.Fprintf(&w, "| [%d] %s: %s\n", call.Number, oneLine(call.Tool), oneLine(call.Summary))
		if why := whyAsked(call); why != "" {
			fmt.Fprintf(&w, "|     %s\n", oneLine(why))
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
		fmt.Fprintf(&w, "|     -> %s\n", oneLine(call.Outcome()))
	}
	if !c.Complete() {
		approvers := "none configured"
		if !c.Approvers.Empty() {
			var who []string
			who = append(who, c.Approvers.Users...)
			for _, g := range c.Approvers.Groups {
				who = append(who, "group "+g)
			}
			for _, r := range c.Approvers.Roles {
				who = append(who, "role "+r)
			}
			approvers = oneLine(strings.Join(who, ", "))
		}
		fmt.Fprintf(&w, "| Approvers: %s. Expires %s.\n", approvers, c.ExpiresAt.UTC().Format(time.RFC3339))
		fmt.Fprintf(&w, "+-- /allow N  /deny N [reason]  /allow all  /deny all [reason]  /args N\n")
	} else {
		fmt.Fprintf(&w, "+--\n")
	}
	return w.String()
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
func oneLine(s string) string { return strings.Join(strings.Fields(visible.Reveal(s)), " ") }
