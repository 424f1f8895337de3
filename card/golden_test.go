package card

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/confirm"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// The golden files in testdata/ hold every part a card, a run message, a
// notice and a form show, as package card chooses them, one part a line:
// the words every platform lays out. A change of wording shows in their
// diff; go test ./card -run TestGolden -update rewrites them.

var (
	t0      = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	decided = t0.Add(90 * time.Second)
)

func goldenCard() Card {
	return Card{
		BatchID: "k3q9x2abcdefghijklmnopqrst", Intro: "I'll check the api first, then deploy it.", RequestedBy: "UBOB",
		Approvers: confirm.Approvers{Users: []string{"UALICE"}, Groups: []string{"SOPS"}},
		CreatedAt: t0, ExpiresAt: t0.Add(30 * time.Minute), Status: confirm.BatchPending, Now: t0,
		ExtendRef: "k3q9x2abcdefghijklmnopqrst.2", ExtendBy: 30 * time.Minute, AllRef: "k3q9x2abcdefghijklmnopqrst.all",
		Calls: []Call{
			{Ref: "k3q9x2abcdefghijklmnopqrst.1", Number: 1, Tool: "service_status", Summary: "Read the status of api",
				Args: "{\n  \"service\": \"api\"\n}", State: State{Kind: Waiting}},
			{Ref: "k3q9x2abcdefghijklmnopqrst.2", Number: 2, Tool: "deploy", Summary: "Deploy api to production",
				Args: "{\n  \"environment\": \"production\",\n  \"service\": \"api\"\n}", Flagged: true, Approvals: 1,
				Reasons: []confirm.Reason{{Kind: confirm.ReasonToolFlag}}, Editable: true, State: State{Kind: Waiting}},
		},
	}
}

func TestGolden(t *testing.T) {
	cards := map[string]func() Card{
		"card_waiting": goldenCard,
		"card_decided": func() Card {
			c := goldenCard()
			c.Status = confirm.BatchDone
			c.Calls[0].State, c.Calls[0].Run = State{Kind: AllowedByPolicy}, confirm.RunSucceeded
			c.Calls[1].State = State{Kind: Denied, By: "UALICE", At: &decided, Reason: "not during the incident"}
			return c
		},
		"card_escalated": func() Card {
			c := goldenCard()
			c.Escalations = []Escalation{
				{At: t0.Add(10 * time.Minute), Mention: confirm.Approvers{Groups: []string{"SLEADS"}}, Approvers: confirm.Approvers{Users: []string{"ULEAD"}}, Fired: true},
				{At: t0.Add(20 * time.Minute), Mention: confirm.Approvers{Users: []string{"UBOSS"}}},
				{At: t0.Add(25 * time.Minute), Approvers: confirm.Approvers{Roles: []string{"sre"}}},
			}
			return c
		},
		"card_extended": func() Card {
			c := goldenCard()
			c.Extended, c.ExpiresAt = &Extension{By: "UCAROL", At: decided}, t0.Add(60*time.Minute)
			return c
		},
		"card_copy": func() Card {
			c := goldenCard()
			c.Copy, c.ThreadLink = CopyDM, "https://example.slack.com/archives/C1/p1"
			return c
		},
		"card_critical": func() Card {
			c := goldenCard()
			c.GrantFor = time.Hour
			c.Calls[1].Risk = confirm.RiskCritical
			c.Calls[1].Approvals = 2
			c.Calls[1].Votes = []confirm.Vote{{By: "UALICE", At: decided}}
			c.Calls[1].Restrict = []confirm.Approvers{{Users: []string{"UALICE", "UDAVE"}}, {Groups: []string{"SOPS"}}}
			return c
		},
		"card_edited": func() Card {
			c := goldenCard()
			c.Calls[1].Edited = &Edit{By: "UALICE", At: decided, Changes: []Change{
				{Key: "environment", Before: `"production"`, After: `"staging"`}, {Key: "replicas", Before: "3"}, {Key: "", After: "1"}}}
			return c
		},
		"card_step": func() Card {
			c := goldenCard()
			c.Intro, c.Calls = "", c.Calls[1:]
			c.Calls[0].Number = 1
			c.Step = &Step{Runbook: "restart", ID: "deploy_api", StartedBy: "UBOB", Attempt: 2, Attempts: 5}
			return c
		},
		"card_preview_cut": func() Card {
			c := goldenCard()
			c.Calls[1].Preview = &Preview{State: confirm.PreviewDone, Output: strings.Repeat("+ replicas: 20\n", 4), Hash: strings.Repeat("ab", 32), Size: 70000}
			return c
		},
	}
	for name, mk := range cards {
		t.Run(name, func(t *testing.T) { golden(t, name, dumpCard(mk())) })
	}
	t.Run("run", func(t *testing.T) {
		var b strings.Builder
		for _, st := range []confirm.RunbookStatus{confirm.RunbookRunning, confirm.RunbookHalted, confirm.RunbookSucceeded} {
			r := Run{ID: "r1", Runbook: "restart", RequestedBy: "UBOB", Status: st, Params: `{"service":"api"}`, HaltedAt: "restart",
				Steps: []RunStep{{ID: "check", Tool: "service_status", State: "succeeded (15ms)"}, {ID: "restart", Tool: "restart_service", State: "outcome unknown"}}}
			fmt.Fprintf(&b, "== %s\n%s\n", st, r.Text())
			for _, a := range r.Actions() {
				b.WriteString(dumpAction(a) + "\n")
			}
		}
		golden(t, "run", b.String())
	})
	t.Run("forms", func(t *testing.T) {
		c := goldenCard().Calls[1]
		c.Preview = &Preview{State: confirm.PreviewDone, Output: "+ replicas: 20\n", Hash: strings.Repeat("ab", 32), Size: 70000}
		var b strings.Builder
		for _, f := range []struct {
			name string
			f    Form
		}{
			{"reason", ReasonForm(c)}, {"reason, call unknown", ReasonForm(Call{Number: 2})},
			{"edit", EditForm(2, c.Tool, c.Summary, c.Args, false)}, {"edit, critical", EditForm(2, c.Tool, c.Summary, c.Args, true)},
			{"phrase", PhraseForm(2, c.Tool, "prod/api")},
		} {
			b.WriteString(dumpForm(f.name, f.f))
		}
		for _, v := range []struct {
			name string
			v    View
		}{{"arguments", ArgsView(c)}, {"preview", PreviewView(c)}} {
			fmt.Fprintf(&b, "== view %s\ntitle: %s\nhead: %s\nquote: %s\nempty: %s\ncut: %s\n", v.name, v.v.Title, dumpLine(v.v.Head), v.v.Quote, v.v.Empty, v.v.Cut(98, 120))
		}
		fmt.Fprintf(&b, "attached: %s\nno phrase: %s\n", Attached("arguments.json", 12345), NoPhrase)
		golden(t, "forms", b.String())
	})
	t.Run("notices", func(t *testing.T) {
		var b strings.Builder
		revoked := decided
		g := GrantNotice{Ref: "g.1", GrantID: "g1", Tool: "deploy", By: "UALICE", For: "UBOB", Until: t0.Add(time.Hour)}
		dumpNotice(&b, "grant, active", g.Notice(t0))
		dumpNotice(&b, "grant, lapsed", g.Notice(t0.Add(2*time.Hour)))
		g.RevokedBy, g.RevokedAt = "UCAROL", &revoked
		dumpNotice(&b, "grant, revoked", g.Notice(t0))
		fmt.Fprintf(&b, "text: %s\nrevoke: %s / %s\n", g.Text(), RevokeLabel, g.RevokeA11yLabel(func(s string) string { return s }))
		u := UnknownNotice{Check: Check{Ref: "c.1"}, Number: 1, Tool: "charge", Summary: "Charge 10 EUR"}
		dumpNotice(&b, "unknown", u.Notice())
		fmt.Fprintf(&b, "fallback: %s\ntext: %s\n", u.Fallback(), u.Text())
		u.Check.By, u.Check.At = "UALICE", &revoked
		dumpNotice(&b, "unknown, checked", u.Notice())
		fmt.Fprintf(&b, "fallback: %s\n", u.Fallback())
		c := goldenCard()
		p := Pointer{BatchID: c.BatchID, Channel: "CAPPROVE", CardLink: "https://example.slack.com/archives/CAPPROVE/p2", Status: c.Status, Calls: c.Calls}
		fmt.Fprintf(&b, "== pointer, waiting\nhead: %s\nfallback: %s\n", dumpLine(p.Head()), p.Fallback("#approvals"))
		p.Calls[0].State = State{Kind: AllowedByPolicy}
		p.Calls[1].State = State{Kind: Allowed, By: "UALICE", At: &decided}
		fmt.Fprintf(&b, "== pointer, closed\nhead: %s\nfallback: %s\nmore: %s\n", dumpLine(p.Head()), p.Fallback("#approvals"), MoreCalls(3))
		golden(t, "notices", b.String())
	})
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".txt")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./card -run TestGolden -update to create it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs from the golden file; run go test ./card -run TestGolden -update and review the diff\ngot:\n%s", path, got)
	}
}

// dumpCard writes every part of a card, one a line.
func dumpCard(c Card) string {
	var b strings.Builder
	fmt.Fprintf(&b, "title: %s\n", c.Title())
	if l := c.CopyNote(); len(l.Parts) > 0 {
		fmt.Fprintf(&b, "copy: %s\n", dumpLine(l))
	}
	fmt.Fprintf(&b, "lead: %s\n", dumpLine(c.Lead()))
	if label, said := c.Said(); said != "" {
		fmt.Fprintf(&b, "said: %s «%s»\n", label, said)
	}
	for _, call := range c.Calls {
		fmt.Fprintf(&b, "call %d `%s`: %s\n", call.Number, call.Tool, call.Gate())
		if d := call.Deciders(); len(d.Parts) > 0 {
			fmt.Fprintf(&b, "  deciders: %s\n", dumpLine(d))
		}
		if e := call.Edited; e != nil {
			fmt.Fprintf(&b, "  edited: %s\n", dumpLine(e.Line(len(e.Changes))))
			for _, ch := range e.Changes {
				fmt.Fprintf(&b, "    %s\n", dumpParts(ch.Parts()))
			}
		}
		if p := call.Preview; p != nil {
			fmt.Fprintf(&b, "  preview: %s\n  preview cut: %s\n  preview note: %s\n", p.Heading(), dumpLine(PreviewCut(420, call.Flagged && call.Open(), call.Number)), p.CutNote())
		}
		acts := c.Actions(call, nil)
		fmt.Fprintf(&b, "  args cut: %s\n", dumpLine(ArgsCut(2105, Offers(acts, ActShowArgs), call.Number)))
		s := call.Status()
		fmt.Fprintf(&b, "  status: %s\n", dumpLine(s.Decision))
		if len(s.Run.Parts) > 0 {
			fmt.Fprintf(&b, "  run: %s\n", dumpLine(s.Run))
		}
		for _, n := range s.Notes {
			fmt.Fprintf(&b, "  note: %s\n", dumpLine(n))
		}
		for _, a := range acts {
			fmt.Fprintf(&b, "  button: %s\n", dumpAction(a))
		}
		if Offers(acts, ActAllowTyped) {
			for _, l := range strings.Split(strings.TrimSuffix(dumpForm("Allow…", PhraseForm(call.Number, call.Tool, "prod/api")), "\n"), "\n") {
				b.WriteString("  " + l + "\n")
			}
		}
		if v, ok := c.Cover(call); ok {
			fmt.Fprintf(&b, "  covers: %s\n", dumpLine(v.Line()))
		}
	}
	for _, l := range c.Schedule(2) {
		fmt.Fprintf(&b, "schedule: %s\n", dumpLine(l))
	}
	for _, a := range c.CardActions() {
		fmt.Fprintf(&b, "card button: %s\n", dumpAction(a))
	}
	for _, l := range c.Footer() {
		fmt.Fprintf(&b, "footer: %s\n", dumpLine(l))
	}
	fmt.Fprintf(&b, "fallback:\n%s\n", c.Fallback())
	if len(c.Calls) > 1 {
		fmt.Fprintf(&b, "part note: %s\npart fallback:\n%s\n", c.PartNote(2, 2, 2, 2), c.PartFallback(2, 2, c.Calls[1:]))
	}
	fmt.Fprintf(&b, "not shown: %s\n", dumpLine(NotShown(3, 50, 10000)))
	return b.String()
}

func dumpForm(name string, f Form) string {
	var b strings.Builder
	fmt.Fprintf(&b, "== form %s\ntitle: %s\n", name, f.Title)
	if len(f.About.Parts) > 0 {
		fmt.Fprintf(&b, "about: %s\n", dumpLine(f.About))
	}
	if f.Quote != "" {
		fmt.Fprintf(&b, "quote: «%s»\n", f.Quote)
	}
	if len(f.Note.Parts) > 0 {
		fmt.Fprintf(&b, "note: %s\n", dumpLine(f.Note))
	}
	for _, in := range f.Fields {
		fmt.Fprintf(&b, "field: label %q, placeholder %q, hint %q, min %d, multiline %v, value %d characters\n",
			in.Label, in.Placeholder, in.Hint, in.MinLen, in.Multiline, len(in.Value))
	}
	fmt.Fprintf(&b, "submit: %s / %s\n", f.Submit, f.Cancel)
	return b.String()
}

func dumpNotice(b *strings.Builder, name string, n Notice) {
	fmt.Fprintf(b, "== %s\n", name)
	for _, l := range n.Lines {
		fmt.Fprintf(b, "line: %s\n", dumpLine(l))
	}
	if n.Quote != "" {
		fmt.Fprintf(b, "quote: «%s»\n", n.Quote)
	}
	if len(n.Foot.Parts) > 0 {
		fmt.Fprintf(b, "foot: %s\n", dumpLine(n.Foot))
	}
}

var iconNames = map[Icon]string{
	IconWaiting: "waiting", IconPolicy: "policy", IconAllowed: "allowed", IconDenied: "denied", IconRefused: "refused",
	IconExpired: "expired", IconWarning: "warning", IconQuestion: "question", IconRunning: "running", IconSucceeded: "succeeded",
	IconFailed: "failed", IconUnknown: "unknown", IconChecked: "checked", IconCopyDM: "copy-dm", IconCopyApprovals: "copy-approvals",
	IconExtended: "extended", IconEscalated: "escalated", IconEscalates: "escalates", IconGrant: "grant", IconRevoked: "revoked",
	IconPointer: "pointer", IconClosed: "closed", IconNotShown: "not-shown", IconEdited: "edited", IconRecheck: "recheck",
}

// dumpLine writes a line: its icon in brackets, then its parts, each kind
// marked (see dumpParts).
func dumpLine(l Line) string {
	s := dumpParts(l.Parts)
	if n, ok := iconNames[l.Icon]; ok {
		s = "[" + n + "] " + s
	}
	return s
}

// dumpParts writes parts: words as they are, *stressed*, _labels_,
// @people, {times}, `names`, «quoted text», [links](url), #channels and
// [[buttons]].
func dumpParts(ps []Part) string {
	var b strings.Builder
	for _, p := range ps {
		switch p.Kind {
		case Words:
			b.WriteString(p.Text)
		case Strong:
			b.WriteString("*" + p.Text + "*")
		case Label:
			b.WriteString("_" + p.Text + "_")
		case Person:
			b.WriteString("@" + p.Text)
		case People:
			b.WriteString("@{" + strings.Join(p.Who.Names(), ", ") + "}")
		case Time:
			b.WriteString("{time " + p.At.UTC().Format("2006-01-02 15:04:05") + "}")
		case Clock:
			b.WriteString("{clock " + p.At.UTC().Format("15:04") + "}")
		case Deadline:
			b.WriteString("{deadline " + p.At.UTC().Format("2006-01-02 15:04") + "}")
		case Code:
			b.WriteString("`" + p.Text + "`")
		case Quote, Output:
			b.WriteString("«" + p.Text + "»")
		case Link:
			b.WriteString(p.Lead + "[" + p.Text + "](" + p.URL + ")")
		case Channel:
			b.WriteString("#" + p.Text)
		case Control:
			fmt.Fprintf(&b, "[[%s]]", p.Text)
		}
	}
	return b.String()
}

func dumpAction(a Action) string {
	return fmt.Sprintf("%q / %q / %q (emphasis %d, row %d)", a.Label, a.NumberedLabel, a.A11yLabel, a.Emphasis, a.Row)
}
