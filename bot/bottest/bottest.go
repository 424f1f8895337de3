// Package bottest holds the test doubles of the bot's edges: a platform
// that records what the bot posted, and a tool set of counting tools.
// Tests of the bot and of what sits beside it (events, adapters) share
// them instead of each defining its own.
package bottest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/airlockhq/airlock/confirm"
	"sync"
	"sync/atomic"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/model"
	"github.com/airlockhq/airlock/tools"
)

// Tool is a tool that counts its runs and records their arguments. Its
// Validate takes a JSON object without a "bad" key; its summary is its
// name and the arguments.
type Tool struct {
	Name     string
	Confirms bool // what Confirm answers
	Runs     atomic.Int64
	// Log, when set, gets "<name>:<idempotency key>" for each run, under
	// Mu (shared by the tools of one test; nil: the tool's own).
	Log   *[]string
	Mu    *sync.Mutex
	Block chan struct{} // when set, a run waits for it
	// Description is the spec's (a change of it is a change of the tool's
	// definition, as an MCP server's new schema is).
	Description string
	// Rating is what Risk answers (tools[].risk); "": the default.
	Rating confirm.Risk
	Args   []string // arguments of each run, in order (guarded by Mu)

	// PhraseOf, when set, is what ConfirmPhrase renders from a call's
	// arguments (tools[].confirm_phrase); nil: the tool's name.
	PhraseOf func(args json.RawMessage) (string, error)

	own sync.Mutex
}

func (f *Tool) lock() *sync.Mutex {
	if f.Mu != nil {
		return f.Mu
	}
	return &f.own
}

func (f *Tool) Spec() model.ToolSpec {
	return model.ToolSpec{Name: f.Name, Description: f.Description}
}
func (f *Tool) Confirm() bool      { return f.Confirms }
func (f *Tool) Risk() confirm.Risk { return f.Rating }
func (f *Tool) ConfirmPhrase(args json.RawMessage) (string, error) {
	if f.PhraseOf == nil {
		return f.Name, nil
	}
	return f.PhraseOf(args)
}
func (f *Tool) Validate(args json.RawMessage) error {
	var m map[string]any
	if err := json.Unmarshal(args, &m); err != nil {
		return fmt.Errorf("invalid arguments: not a JSON object")
	}
	if _, bad := m["bad"]; bad {
		return errors.New("invalid arguments: /bad: not allowed")
	}
	return nil
}
func (f *Tool) Summary(args json.RawMessage) (string, error) {
	return f.Name + " " + string(args), nil
}
func (f *Tool) Run(_ context.Context, args json.RawMessage, key string) (string, error) {
	if f.Block != nil {
		<-f.Block
	}
	f.Runs.Add(1)
	mu := f.lock()
	mu.Lock()
	f.Args = append(f.Args, string(args))
	if f.Log != nil {
		*f.Log = append(*f.Log, f.Name+":"+key)
	}
	mu.Unlock()
	return f.Name + " done", nil
}

// Tools is a tool set (bot.Config's Tools) of Tool.
type Tools map[string]*Tool

func (t Tools) Get(name string) (tools.Tool, bool) {
	f, ok := t[name]
	if !ok {
		return nil, false
	}
	return f, true
}
func (t Tools) Specs() []model.ToolSpec {
	var out []model.ToolSpec
	for _, f := range t {
		out = append(out, f.Spec())
	}
	return out
}

// Platform records what the bot posted. A card's reference is
// "card-<batch id>"; an update under another reference fails.
type Platform struct {
	Mu      sync.Mutex // guards the fields, for a test reading them while the bot runs
	Cards   []card.Card
	Updates []card.Card
	Posts   []string
}

var _ bot.Platform = (*Platform)(nil)

func (p *Platform) PostCard(_ context.Context, _ bot.Thread, c card.Card) (string, error) {
	p.Mu.Lock()
	defer p.Mu.Unlock()
	p.Cards = append(p.Cards, c)
	return "card-" + c.BatchID, nil
}
func (p *Platform) UpdateCard(_ context.Context, _ bot.Thread, ref string, c card.Card) error {
	p.Mu.Lock()
	defer p.Mu.Unlock()
	if ref != "card-"+c.BatchID {
		return fmt.Errorf("wrong ref %q", ref)
	}
	p.Updates = append(p.Updates, c)
	return nil
}
func (p *Platform) Post(_ context.Context, _ bot.Thread, s string) error {
	p.Mu.Lock()
	defer p.Mu.Unlock()
	p.Posts = append(p.Posts, s)
	return nil
}

// LastCard is the card as last posted or updated.
func (p *Platform) LastCard() card.Card {
	p.Mu.Lock()
	defer p.Mu.Unlock()
	if len(p.Updates) > 0 {
		return p.Updates[len(p.Updates)-1]
	}
	return p.Cards[len(p.Cards)-1]
}

// LastPost is the text last posted ("" when none).
func (p *Platform) LastPost() string {
	p.Mu.Lock()
	defer p.Mu.Unlock()
	if len(p.Posts) == 0 {
		return ""
	}
	return p.Posts[len(p.Posts)-1]
}
