// Package surfacetest is one behaviour suite for every chat surface, as
// Teleport's access-request plugins have one suite that each platform's
// tests embed. The cases (a paused reply and its card, Allow, Deny with a
// reason, quorum, Edit, Allow all, a critical call's typed phrase, a
// preview, a runbook's run message, a stale click, a stranger's click)
// are written once, against the real bot on a SQLite file, a scripted
// model and tools that record their runs; each platform's tests supply a
// Driver that works the platform only from outside, through its fake
// (Slack's and Discord's on 127.0.0.1, the terminal's pipe), as its
// people do: asking, pressing what a card shows, typing what a form asks.
//
// The suite asserts what a person would notice: what the platform was
// given to show (the cards as they show now, the agent's answers, run
// messages, what only the clicker was told), what the tools ran with and
// what the model was told. A surface that cannot do a case (the terminal
// has one person: no second approver, no stranger) says so in
// Driver.Lacks, and the case is skipped with that reason.
package surfacetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/model"
	"github.com/airlockhq/airlock/model/modeltest"
	"github.com/airlockhq/airlock/runbook"
	"github.com/airlockhq/airlock/storage"
	"github.com/airlockhq/airlock/tools"
)

// Person is someone using the surface.
type Person int

const (
	Requester Person = iota + 1 // asks the agent
	Approver                    // may decide the channel's calls
	Approver2                   // a second, different approver
	Stranger                    // neither asked nor may decide
)

func (p Person) String() string {
	switch p {
	case Requester:
		return "the requester"
	case Approver:
		return "the approver"
	case Approver2:
		return "the second approver"
	case Stranger:
		return "a stranger"
	}
	return fmt.Sprintf("Person(%d)", int(p))
}

// Button is a control a card offers, as the surface shows it (a button,
// or a command on the terminal).
type Button int

const (
	Allow      Button = iota + 1 // a call's Allow
	AllowTyped                   // a critical call's Allow…: input is the phrase typed
	Deny                         // a call's Deny
	DenyReason                   // Deny with reason…: input is the reason
	Edit                         // Edit…: input is the arguments, JSON
	AllowAll                     // the card's Allow all (call 0)
)

func (b Button) String() string {
	return [...]string{"?", "Allow", "Allow…", "Deny", "Deny with reason…", "Edit…", "Allow all"}[min(int(b), 6)]
}

// Capability is something a case needs that a surface may not have.
type Capability int

const (
	SecondApprover    Capability = iota + 1 // two different people approve
	Strangers                               // someone who is no approver clicks
	SeparateRequester                       // the requester is no approver (may withdraw, not allow)
	EditsCards                              // a card is edited in place: decided, it shows no buttons
)

// Places are the surface's names: its platform, the channel where the
// requester asks, and each person's user id there.
type Places struct {
	Platform string
	Channel  string
	Users    map[Person]string
	// Surface is where the audit says a click on a card came from
	// (confirm.SurfaceThread, confirm.SurfaceTerminal).
	Surface string
	// SelfApproval: the requester approves their own calls (the terminal's
	// one person, as `airlock chat` sets it).
	SelfApproval bool
}

// Driver is one platform, driven from outside.
type Driver interface {
	Places() Places
	// Lacks names each capability the surface does not have, and why.
	Lacks() map[Capability]string
	// Start runs the platform's adapter around b (registered with b as
	// its platform) until the test ends.
	Start(t *testing.T, b *bot.Bot, store *storage.DB) Surface
}

// Surface is a running platform as its people see and use it. Its
// methods fail t when the platform does not show what they need.
type Surface interface {
	// Ask has the requester ask the agent text in a new conversation.
	Ask(text string)
	// StartRun has the requester start a runbook: "NAME k=v ...".
	StartRun(command string)
	// Cards are the card texts posted so far in the conversation, oldest
	// first, each as it shows now: every word a person reads, markup
	// taken out.
	Cards() []string
	// Updates counts the changes made to what the conversation shows
	// (messages edited, a card's changes printed).
	Updates() int
	// Buttons are the labels of the buttons the card-th card shows now
	// (a surface without EditsCards has none to take back).
	Buttons(card int) []string
	// Press has who use a button of call (1-based; 0 for the card's own
	// buttons) on the card-th card (1-based), as that card last showed
	// the button; input fills the form the button opens.
	Press(who Person, card, call int, b Button, input string)
	// Posts are the messages in the conversation that are neither cards
	// nor run messages (the agent's answers), oldest first.
	Posts() []string
	// Runs are the conversation's run messages, each as it shows now,
	// oldest first.
	Runs() []string
	// Notices are what only who was told (ephemeral answers in the
	// conversation, a form's errors), oldest first.
	Notices(who Person) []string
	// Name is how the surface writes a person on a card.
	Name(p Person) string
	// Settle waits until the surface has answered everything it was
	// handed.
	Settle()
}

// Run runs every case against the platform d drives.
func Run(t *testing.T, d Driver) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, need := range c.needs {
				if why, ok := d.Lacks()[need]; ok {
					t.Skipf("%s: %s", d.Places().Platform, why)
				}
			}
			c.run(t, d)
		})
	}
}

type testCase struct {
	name  string
	needs []Capability
	run   func(t *testing.T, d Driver)
}

// within bounds every wait for something the surface should show.
const within = 10 * time.Second

// --- the world: the real bot, a scripted model, recording tools ---

// tool is a test tool: gated or not, its runs recorded.
type tool struct {
	name, summary string // summary: a format of the "service" and "environment" arguments
	gated         bool
	mu            sync.Mutex
	runs          []string // the arguments of each run
	// preview, when set, makes the tool preview its calls: each preview
	// waits for previewGo, then answers preview.
	preview   string
	previewGo chan struct{}
}

var _ tools.Tool = (*tool)(nil)
var _ tools.Previewer = (*tool)(nil)

func (x *tool) Spec() model.ToolSpec {
	return model.ToolSpec{Name: x.name, Description: "A test tool.", Parameters: json.RawMessage(`{"type":"object"}`)}
}
func (x *tool) Confirm() bool { return x.gated }
func (x *tool) Validate(args json.RawMessage) error {
	var m map[string]any
	if err := json.Unmarshal(args, &m); err != nil || m == nil {
		return fmt.Errorf("%w: not a JSON object", tools.ErrInvalidArgs)
	}
	return nil
}
func (x *tool) Summary(args json.RawMessage) (string, error) {
	var a struct{ Service, Environment, Path string }
	_ = json.Unmarshal(args, &a)
	return strings.NewReplacer("{service}", a.Service, "{environment}", a.Environment, "{path}", a.Path).Replace(x.summary), nil
}
func (x *tool) Run(_ context.Context, args json.RawMessage, _ string) (string, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.runs = append(x.runs, string(args))
	s, _ := x.Summary(args)
	return "done: " + s, nil
}
func (x *tool) Previews() (bool, bool) { return x.preview != "", false }
func (x *tool) Preview(ctx context.Context, _ json.RawMessage) (string, error) {
	select {
	case <-x.previewGo:
		return x.preview, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// ran is the arguments of each run so far.
func (x *tool) ran() []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	return slices.Clone(x.runs)
}

type toolSet []*tool

func (s toolSet) Get(name string) (tools.Tool, bool) {
	for _, x := range s {
		if x.name == name {
			return x, true
		}
	}
	return nil, false
}

func (s toolSet) Specs() []model.ToolSpec {
	var out []model.ToolSpec
	for _, x := range s {
		out = append(out, x.Spec())
	}
	return out
}

// world is one case's bot and surface.
type world struct {
	t      *testing.T
	places Places
	lacks  map[Capability]string
	model  *modeltest.Scripted
	status *tool // ungated
	deploy *tool // gated
	apply  *tool // gated, with a preview
	bot    *bot.Bot
	db     *storage.DB
	s      Surface
}

// restartRunbook: read the status, deploy (gated), read it again.
func restartRunbook(t *testing.T) []*runbook.Runbook {
	t.Helper()
	rbs, err := runbook.Compile("runbooks", []runbook.Config{{
		Name: "restart", Description: "Deploy a service again.",
		Parameters: map[string]any{"type": "object", "properties": map[string]any{"service": map[string]any{"type": "string"}},
			"required": []any{"service"}},
		Steps: []runbook.StepConfig{
			{ID: "before", Tool: "status", Args: map[string]any{"service": "{{ params.service }}"}},
			{ID: "roll", Tool: "deploy", Args: map[string]any{"service": "{{ params.service }}", "environment": "production"}},
			{ID: "after", Tool: "status", Args: map[string]any{"service": "{{ params.service }}"}},
		},
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return rbs
}

// newWorld starts d's surface around the real bot on a fresh SQLite
// file; edit changes the bot's configuration first.
func newWorld(t *testing.T, d Driver, edit func(*bot.Config)) *world {
	t.Helper()
	p := d.Places()
	w := &world{t: t, places: p, lacks: d.Lacks(), model: modeltest.NewScripted(),
		status: &tool{name: "status", summary: "Read the status of {service}"},
		deploy: &tool{name: "deploy", summary: "Deploy {service} to {environment}", gated: true},
		apply: &tool{name: "apply", summary: "Apply {path}", gated: true,
			preview: "--- live/web\n+++ merged/web\n-  replicas: 2\n+  replicas: 20\n", previewGo: make(chan struct{})},
	}
	db, err := storage.Open(context.Background(), "sqlite", filepath.Join(t.TempDir(), "airlock.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	approvers := []string{p.Users[Approver]}
	if u := p.Users[Approver2]; u != "" && u != p.Users[Approver] {
		approvers = append(approvers, u)
	}
	cfg := bot.Config{
		Store:        db,
		Model:        w.model,
		Tools:        toolSet{w.status, w.deploy, w.apply},
		Channels:     bot.NewChannels([]bot.Channel{{Platform: p.Platform, ID: p.Channel, Approvers: approvers}}),
		Runbooks:     restartRunbook(t),
		Timeout:      30 * time.Minute,
		SelfApproval: p.SelfApproval,
	}
	if edit != nil {
		edit(&cfg)
	}
	b, err := bot.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w.bot, w.db = b, db
	w.s = d.Start(t, b, db)
	t.Cleanup(func() { b.Runbooks().Wait() })
	return w
}

// --- waiting for what the surface shows ---

func (w *world) eventually(what string, cond func() bool) {
	w.t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			w.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// card waits for the n-th card and returns its text as it shows now.
func (w *world) card(n int) string {
	w.t.Helper()
	w.eventually(fmt.Sprintf("card %d", n), func() bool { return len(w.s.Cards()) >= n })
	return w.s.Cards()[n-1]
}

// cardSays waits until the n-th card shows every piece of wants (case
// folded), and returns it.
func (w *world) cardSays(n int, wants ...string) string {
	w.t.Helper()
	w.card(n)
	var text string
	deadline := time.Now().Add(within)
	for {
		text = w.s.Cards()[n-1]
		if missing := lacks(text, wants); len(missing) == 0 {
			return text
		} else if time.Now().After(deadline) {
			w.t.Fatalf("card %d never showed %q; it shows:\n%s", n, missing, text)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// lacks is the wants text does not contain, case folded.
func lacks(text string, wants []string) []string {
	var out []string
	for _, want := range wants {
		if !strings.Contains(strings.ToLower(text), strings.ToLower(want)) {
			out = append(out, want)
		}
	}
	return out
}

// noButtons checks the n-th card, decided, offers no button; on a surface
// that does not edit cards it says why it does not check.
func (w *world) noButtons(n int) {
	w.t.Helper()
	if why, ok := w.lacks[EditsCards]; ok {
		w.t.Logf("not checked that the decided card lost its buttons: %s", why)
		return
	}
	w.eventually(fmt.Sprintf("card %d without buttons (it shows %q)", n, w.s.Buttons(n)), func() bool { return len(w.s.Buttons(n)) == 0 })
}

// answer waits for a post containing want.
func (w *world) answer(want string) string {
	w.t.Helper()
	var found string
	deadline := time.Now().Add(within)
	for {
		for _, p := range w.s.Posts() {
			if strings.Contains(p, want) {
				found = p
			}
		}
		if found != "" {
			return found
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("no post %q; posts: %q", want, w.s.Posts())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// notice presses, and waits for who to be told something new; it
// returns what.
func (w *world) notice(who Person, press func()) string {
	w.t.Helper()
	before := len(w.s.Notices(who))
	press()
	w.eventually(fmt.Sprintf("a notice to %s", who), func() bool { return len(w.s.Notices(who)) > before })
	return strings.Join(w.s.Notices(who)[before:], "\n")
}

// seen is what a person can see and what ran, at one moment.
type seen struct {
	cards   []string
	updates int
	runs    []int // of status, deploy, apply
	asked   int   // requests to the model
	posts   int
}

func (w *world) look() seen {
	return seen{cards: w.s.Cards(), updates: w.s.Updates(), runs: []int{len(w.status.ran()), len(w.deploy.ran()), len(w.apply.ran())},
		asked: len(w.model.Requests()), posts: len(w.s.Posts())}
}

// unchanged checks, once the surface settled, that since before nothing
// ran, no card changed, the model was not asked and nothing was posted.
func (w *world) unchanged(why string, before seen) {
	w.t.Helper()
	w.s.Settle()
	now := w.look()
	if !slices.Equal(now.runs, before.runs) {
		w.t.Errorf("%s: runs of status, deploy, apply went from %v to %v", why, before.runs, now.runs)
	}
	if !slices.Equal(now.cards, before.cards) || now.updates != before.updates {
		w.t.Errorf("%s: what shows changed (%d updates, were %d):\n%s\n--- were:\n%s", why, now.updates, before.updates,
			strings.Join(now.cards, "\n---\n"), strings.Join(before.cards, "\n---\n"))
	}
	if now.asked != before.asked || now.posts != before.posts {
		w.t.Errorf("%s: the model was asked %d times (was %d), %d posts (were %d)", why, now.asked, before.asked, now.posts, before.posts)
	}
}

// audited is the audit trail's events of a kind.
func (w *world) audited(kind confirm.AuditKind) []confirm.AuditEvent {
	w.t.Helper()
	evs, err := w.db.AuditEvents(context.Background(), confirm.AuditFilter{})
	if err != nil {
		w.t.Fatal(err)
	}
	var out []confirm.AuditEvent
	for _, e := range evs {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// decisionsAudited checks the audit trail holds one decision for each of
// want ("allowed", "denied"), in order, each by who, from the surface's
// cards.
func (w *world) decisionsAudited(who Person, want ...string) {
	w.t.Helper()
	var got []string
	for _, e := range w.audited(confirm.AuditDecision) {
		var d struct{ Status, Surface string }
		if err := json.Unmarshal([]byte(e.Detail), &d); err != nil {
			w.t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s by %s from %s", d.Status, e.Actor, d.Surface))
	}
	var exp []string
	for _, s := range want {
		exp = append(exp, fmt.Sprintf("%s by %s from %s", s, w.places.Users[who], w.places.Surface))
	}
	if !slices.Equal(got, exp) {
		w.t.Errorf("audited decisions %q, want %q", got, exp)
	}
}

// ranOnce checks x ran exactly once, with args (compared as JSON).
func (w *world) ranOnce(x *tool, args string) {
	w.t.Helper()
	r := x.ran()
	if len(r) != 1 || !sameJSON(r[0], args) {
		w.t.Fatalf("%s ran with %q, want once with %s", x.name, r, args)
	}
}

func sameJSON(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return string(ja) == string(jb)
}

// told is what the model was told its call named tool did, in its last
// request.
func (w *world) told(tool string) string {
	w.t.Helper()
	reqs := w.model.Requests()
	if len(reqs) == 0 {
		w.t.Fatal("the model was never asked")
	}
	var out []string
	for _, r := range modeltest.LastToolResults(w.t, reqs[len(reqs)-1]) {
		if r.Name == tool {
			out = append(out, r.Content)
		}
	}
	if len(out) == 0 {
		w.t.Fatalf("the model was told nothing of %s", tool)
	}
	return strings.Join(out, "\n")
}

// argLines are args as a card shows them, indented as the model wrote
// them: each line must show.
func argLines(args string) []string {
	var b bytes.Buffer
	if err := json.Indent(&b, []byte(args), "", "  "); err != nil {
		panic(err)
	}
	var out []string
	for _, l := range strings.Split(b.String(), "\n") {
		if l = strings.TrimSpace(l); len(l) > 1 {
			out = append(out, l)
		}
	}
	return out
}

var tc = modeltest.ToolCall

// The model's paused reply of most cases: a status read (no approval
// needed) and a deploy (gated), then its answer once they ran.
const (
	intro      = "I'll check api, then deploy it."
	statusArgs = `{"service":"api"}`
	deployArgs = `{"service":"api","environment":"production"}`
)

func (w *world) pushDeploy(answer string) {
	w.model.Push(model.Message{Text: intro, ToolCalls: []confirm.ToolCall{
		tc("call_status", "status", statusArgs),
		tc("call_deploy", "deploy", deployArgs),
	}})
	w.model.PushText(answer)
}
