package shell_test

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/adapters/internal/surfacetest"
	"github.com/airlockhq/airlock/adapters/shell"
	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/storage"
)

// The behaviour suite on the terminal: one person types into the shell
// (a pipe) and reads what it prints.
func TestSurface(t *testing.T) { surfacetest.Run(t, terminal{}) }

type terminal struct{}

func (terminal) Places() surfacetest.Places {
	return surfacetest.Places{Platform: shell.Platform, Channel: shell.DefaultChannel, SelfApproval: true, Surface: confirm.SurfaceTerminal,
		Users: map[surfacetest.Person]string{surfacetest.Requester: shell.DefaultUser, surfacetest.Approver: shell.DefaultUser}}
}

func (terminal) Lacks() map[surfacetest.Capability]string {
	return map[surfacetest.Capability]string{
		surfacetest.SecondApprover:    "the terminal has one person: nobody else approves",
		surfacetest.Strangers:         "the terminal has one person, its approver: there is no stranger to click",
		surfacetest.SeparateRequester: "the terminal's one person both asks and approves",
		surfacetest.EditsCards:        "a terminal cannot take back what it printed: it prints each change below the card",
	}
}

func (terminal) Start(t *testing.T, b *bot.Bot, _ *storage.DB) surfacetest.Surface {
	in, typing := io.Pipe()
	x := &term{t: t, typing: typing, out: &testkit.Buffer{}}
	s := shell.New(in, x.out)
	b.Register(shell.Platform, s)
	done := make(chan error, 1)
	go func() { done <- s.Run(context.Background(), b) }()
	t.Cleanup(func() {
		typing.Close()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Run did not end at the end of its input")
		}
		if t.Failed() {
			t.Logf("the terminal:\n%s", x.out.String())
		}
	})
	x.waitPrompts(1)
	return x
}

// term is the shell as its person uses it: lines typed, the output read.
type term struct {
	t      *testing.T
	typing *io.PipeWriter
	out    *testkit.Buffer
	typed  int // lines typed at the prompt
}

// prompts counts the prompts printed: the shell waits for a line after
// each.
func (x *term) prompts() int {
	n := 0
	for _, l := range strings.Split(x.out.String(), "\n") {
		for strings.HasPrefix(l, "> ") {
			l = l[2:]
			n++
		}
	}
	return n
}

func (x *term) waitPrompts(n int) {
	x.t.Helper()
	testkit.Eventually(x.t, 10*time.Second, fmt.Sprintf("prompt %d", n), func() bool { return x.prompts() >= n })
}

// write types a line, as its answer to a question of the shell's.
func (x *term) write(line string) {
	x.t.Helper()
	if _, err := io.WriteString(x.typing, line+"\n"); err != nil {
		x.t.Fatal(err)
	}
}

// line types a line at the prompt and waits for the next prompt.
func (x *term) line(l string) {
	x.t.Helper()
	x.write(l)
	x.typed++
	x.waitPrompts(x.typed + 1)
}

func (x *term) Ask(text string)                { x.line(text) }
func (x *term) StartRun(command string)        { x.line("/run " + command) }
func (x *term) Name(surfacetest.Person) string { return shell.DefaultUser }
func (x *term) Settle()                        { x.waitPrompts(x.typed + 1) }

func (x *term) Press(who surfacetest.Person, _, call int, b surfacetest.Button, input string) {
	x.t.Helper()
	if who != surfacetest.Requester && who != surfacetest.Approver {
		x.t.Fatalf("the terminal has no %s", who)
	}
	switch b {
	case surfacetest.Allow:
		x.line(fmt.Sprintf("/allow %d", call))
	case surfacetest.Deny:
		x.line(fmt.Sprintf("/deny %d", call))
	case surfacetest.DenyReason:
		x.line(fmt.Sprintf("/deny %d %s", call, input))
	case surfacetest.Edit:
		x.line(fmt.Sprintf("/edit %d %s", call, input))
	case surfacetest.AllowAll:
		x.line("/allow all")
	case surfacetest.AllowTyped:
		// /allow N asks for the phrase, then reads the next line.
		asked := strings.Count(x.out.String(), "Type ")
		x.write(fmt.Sprintf("/allow %d", call))
		x.typed++
		testkit.Eventually(x.t, 10*time.Second, "the phrase asked, or the next prompt", func() bool {
			return strings.Count(x.out.String(), "Type ") > asked || x.prompts() > x.typed
		})
		if x.prompts() <= x.typed {
			x.write(input)
		}
		x.waitPrompts(x.typed + 1)
	default:
		x.t.Fatalf("the terminal has no %s", b)
	}
}

// What the terminal printed, line by line: a card ("+-- APPROVAL NEEDED"
// or "+-- APPROVAL REQUEST CLOSED" through its last "+--" line, its id at
// the end of its footer), an update of a card
// ("  request ID …" and lines indented below it), a run message ("=== "
// and the lines indented below it), a post ("airlock: …"), and what the
// person alone was told (anything else).
type printed struct {
	cards   []string            // card ids, in the order first printed
	card    map[string][]string // id -> its lines as last printed, then its updates
	runs    []string            // run ids in order
	run     map[string]string   // id -> its message as last printed
	posts   []string
	notices []string
	updates int // lines of changes printed below cards
}

var (
	cardHead = regexp.MustCompile(`^\+-- (APPROVAL NEEDED|APPROVAL REQUEST CLOSED)$`)
	// cardID is the card's request id, at the end of its footer.
	cardID = regexp.MustCompile(`· Request (\S+)$`)
	update = regexp.MustCompile(`^  request (\S+) `)
	runID  = regexp.MustCompile(`\(run (\S+)\)`)
	// phraseAsked is /allow N's question for a critical call's phrase.
	phraseAsked = regexp.MustCompile(`^Type .* to allow call \d+(, \S+)?: `)
)

func (x *term) read() printed {
	p := printed{card: map[string][]string{}, run: map[string]string{}}
	lines := strings.Split(x.out.String(), "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		for strings.HasPrefix(l, "> ") {
			l = l[2:]
		}
		if m := phraseAsked.FindStringIndex(l); m != nil {
			// The question, answered on its line (a pipe echoes
			// nothing): what follows is printed after the answer.
			lines[i] = l[m[1]:]
			i--
			continue
		}
		switch {
		case strings.TrimSpace(l) == "" || strings.HasPrefix(l, "airlock chat: you are"):
		case cardHead.MatchString(l):
			block := []string{l}
			for i+1 < len(lines) && strings.HasPrefix(lines[i+1], "|") {
				i++
				block = append(block, lines[i])
			}
			if i+1 < len(lines) && strings.HasPrefix(lines[i+1], "+--") {
				i++
				block = append(block, lines[i])
			}
			id := ""
			for _, b := range block {
				if m := cardID.FindStringSubmatch(b); m != nil {
					id = m[1]
					if len(id) > 8 { // as its updates name it ("  request ID")
						id = id[:8]
					}
				}
			}
			if _, ok := p.card[id]; !ok {
				p.cards = append(p.cards, id)
			}
			p.card[id] = block
		case update.MatchString(l):
			id := update.FindStringSubmatch(l)[1]
			p.card[id] = append(p.card[id], l)
			p.updates++
			for i+1 < len(lines) && strings.HasPrefix(lines[i+1], "    ") {
				i++
				p.card[id] = append(p.card[id], lines[i])
			}
		case strings.HasPrefix(l, "=== "):
			msg := []string{strings.TrimPrefix(l, "=== ")}
			for i+1 < len(lines) && strings.HasPrefix(lines[i+1], "  ") && !update.MatchString(lines[i+1]) {
				i++
				msg = append(msg, strings.TrimPrefix(lines[i], "  "))
			}
			id := msg[0]
			if m := runID.FindStringSubmatch(msg[0]); m != nil {
				id = m[1]
			}
			if _, ok := p.run[id]; !ok {
				p.runs = append(p.runs, id)
			}
			p.run[id] = strings.Join(msg, "\n")
		case strings.HasPrefix(l, "airlock: "):
			p.posts = append(p.posts, strings.TrimPrefix(l, "airlock: "))
		default:
			p.notices = append(p.notices, l)
		}
	}
	return p
}

func (x *term) Cards() []string {
	p := x.read()
	var out []string
	for _, id := range p.cards {
		out = append(out, strings.Join(p.card[id], "\n"))
	}
	return out
}

func (x *term) Runs() []string {
	p := x.read()
	var out []string
	for _, id := range p.runs {
		out = append(out, p.run[id])
	}
	return out
}

func (x *term) Posts() []string      { return x.read().posts }
func (x *term) Updates() int         { return x.read().updates }
func (x *term) Buttons(int) []string { return nil }

func (x *term) Notices(who surfacetest.Person) []string {
	if who != surfacetest.Requester && who != surfacetest.Approver {
		return nil
	}
	return x.read().notices
}
