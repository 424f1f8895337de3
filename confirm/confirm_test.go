package confirm

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func call(id, name string) ToolCall {
	return ToolCall{ID: id, Name: name, Args: json.RawMessage(`{}`)}
}

func TestKeys(t *testing.T) {
	cases := []struct {
		name  string
		calls []ToolCall
		want  []string
	}{
		{"unique ids", []ToolCall{call("a", "x"), call("b", "y")}, []string{"a", "b"}},
		{"missing ids", []ToolCall{call("", "x"), call("", "y")}, []string{"#0", "#1"}},
		{"duplicate ids", []ToolCall{call("a", "x"), call("a", "y"), call("b", "z")}, []string{"#0", "#1", "b"}},
		{"mixed", []ToolCall{call("", "x"), call("c1", "y"), call("", "z")}, []string{"#0", "c1", "#2"}},
		{"id that looks like a position", []ToolCall{call("#1", "x"), call("", "y")}, []string{"#0", "#1"}},
		{"empty reply", nil, []string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Keys(tc.calls)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Keys = %v, want %v", got, tc.want)
			}
			seen := map[string]bool{}
			for _, k := range got {
				if seen[k] {
					t.Fatalf("duplicate key %q", k)
				}
				seen[k] = true
			}
		})
	}
}

func TestKeysDoNotRewriteReply(t *testing.T) {
	calls := []ToolCall{call("a", "x"), call("a", "y")}
	Keys(calls)
	if calls[0].ID != "a" || calls[1].ID != "a" {
		t.Fatalf("reply rewritten: %+v", calls)
	}
}

func lookup(tools map[string]bool) func(string) (ToolInfo, bool) {
	return func(name string) (ToolInfo, bool) {
		c, ok := tools[name]
		return ToolInfo{Name: name, Confirm: c}, ok
	}
}

func TestPolicy(t *testing.T) {
	tools := lookup(map[string]bool{"deploy": true, "status": false, "mcp_delete": false})
	flagged := func(p Policy, names ...string) []bool {
		var out []bool
		for _, n := range names {
			var info *ToolInfo
			if ti, ok := tools(n); ok {
				info = &ti
			}
			out = append(out, p.Evaluate(Request{Call: call("", n), Tool: info}).Ask)
		}
		return out
	}
	names := []string{"deploy", "status", "mcp_delete", "unknown"}
	cases := []struct {
		name string
		p    Policy
		want []bool
	}{
		{"flag", FromToolFlag(), []bool{true, false, false, false}},
		{"names", ForTools("mcp_delete"), []bool{false, false, true, false}},
		{"none", None(), []bool{false, false, false, false}},
		{"all", All(FromToolFlag(), ForTools("mcp_delete")), []bool{true, false, true, false}},
		{"config enabled", NewPolicy(true, []string{"mcp_delete"}), []bool{true, false, true, false}},
		// confirmation.enabled: false stops honouring the flag only; names still apply.
		{"config disabled", NewPolicy(false, []string{"mcp_delete"}), []bool{false, false, true, false}},
		// a config rule can only add: All with None never removes the flag.
		{"all cannot remove", All(FromToolFlag(), None()), []bool{true, false, false, false}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := flagged(tc.p, names...); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("flags = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPlanPausesWholeReply(t *testing.T) {
	tools := lookup(map[string]bool{"deploy": true, "status": false})
	calls := []ToolCall{call("", "status"), call("", "deploy")}
	planned, paused := Plan(calls, Request{}, tools, FromToolFlag(), nil)
	if !paused {
		t.Fatal("a reply with a flagged call must pause")
	}
	if planned[0].Flagged || !planned[1].Flagged {
		t.Fatalf("flags: %+v", planned)
	}
	if planned[0].Key != "#0" || planned[1].Key != "#1" || planned[1].Position != 1 {
		t.Fatalf("keys: %+v", planned)
	}

	_, paused = Plan([]ToolCall{call("", "status")}, Request{}, tools, FromToolFlag(), nil)
	if paused {
		t.Fatal("a reply with no flagged call must not pause")
	}
}

func TestPlanInvalidArgumentsAreNotFlagged(t *testing.T) {
	tools := lookup(map[string]bool{"deploy": true})
	bad := errors.New("invalid arguments: /env: required")
	planned, paused := Plan([]ToolCall{call("x", "deploy")}, Request{}, tools, FromToolFlag(), func(ToolCall) error { return bad })
	if paused {
		t.Fatal("a call with invalid arguments asks nobody")
	}
	if !errors.Is(planned[0].Invalid, bad) || planned[0].Flagged {
		t.Fatalf("planned: %+v", planned[0])
	}
}

func TestPlanGatedInvalidCallBlocksTheWholeReply(t *testing.T) {
	tools := lookup(map[string]bool{"deploy": true, "status": false})
	bad := errors.New("invalid arguments: /env: required")
	calls := []ToolCall{call("a", "status"), call("b", "deploy"), call("c", "deploy")}
	invalidB := func(c ToolCall) error {
		if c.ID == "b" {
			return bad
		}
		return nil
	}
	planned, paused := Plan(calls, Request{}, tools, FromToolFlag(), invalidB)
	if paused {
		t.Fatal("a reply whose gated call is invalid asks nobody")
	}
	if !planned[0].Blocked || planned[1].Blocked || !planned[2].Blocked || planned[2].Flagged {
		t.Fatalf("planned: %+v", planned)
	}
	// An invalid ungated call blocks nothing.
	invalidA := func(c ToolCall) error {
		if c.ID == "a" {
			return bad
		}
		return nil
	}
	planned, paused = Plan(calls, Request{}, tools, FromToolFlag(), invalidA)
	if !paused || planned[1].Blocked || !planned[1].Flagged {
		t.Fatalf("planned: %+v", planned)
	}
}

func TestMerge(t *testing.T) {
	alice := Approvers{Users: []string{"alice"}}
	dba := Approvers{Groups: []string{"S-DBA"}}
	got := Merge(
		Verdict{Ask: true, Approvals: 2, Restrict: []Approvers{alice}, Reasons: []Reason{{Kind: ReasonRule, Rule: "a"}}},
		Verdict{Ask: true, Approvals: 1, Restrict: []Approvers{dba}, NotGrantable: true, Reasons: []Reason{{Kind: ReasonToolFlag}}},
		Verdict{},
	)
	if !got.Ask || got.Deny || got.Approvals != 2 || len(got.Restrict) != 2 || !got.NotGrantable || len(got.Reasons) != 2 {
		t.Fatalf("merge: %+v", got)
	}
	// A deny wins over any ask, and the first deny names the rule.
	got = Merge(Verdict{Ask: true, Approvals: 3}, Verdict{Deny: true, DenyRule: "no-drops", DenyMessage: "no"}, Verdict{Deny: true, DenyRule: "other"})
	if !got.Deny || got.DenyRule != "no-drops" || got.DenyMessage != "no" {
		t.Fatalf("deny: %+v", got)
	}
	// Merging with nothing changes nothing: a policy can only add.
	if v := Merge(Verdict{Ask: true}, Verdict{}); !v.Ask {
		t.Fatal("an empty verdict removed an ask")
	}
}

func TestPlanRefusedCallsAreNotAsked(t *testing.T) {
	tools := lookup(map[string]bool{"drop": true, "status": false})
	deny := PolicyFunc(func(r Request) Verdict {
		if r.Call.Name == "drop" {
			return Verdict{Deny: true, DenyRule: "no-drops"}
		}
		return Verdict{}
	})
	planned, paused := Plan([]ToolCall{call("", "status"), call("", "drop")}, Request{}, tools, All(FromToolFlag(), deny), nil)
	if paused || planned[0].Flagged || !planned[1].Refused || planned[1].Flagged || planned[1].Verdict.DenyRule != "no-drops" {
		t.Fatalf("planned %+v, paused %v", planned, paused)
	}
}

func TestPlanPassesWhereAndWho(t *testing.T) {
	var got Request
	spy := PolicyFunc(func(r Request) Verdict { got = r; return Verdict{} })
	base := Request{Platform: "slack", Channel: "C1", Requester: "U1"}
	Plan([]ToolCall{call("", "deploy")}, base, lookup(map[string]bool{"deploy": true}), spy, nil)
	if got.Platform != "slack" || got.Channel != "C1" || got.Requester != "U1" || got.Call.Name != "deploy" || got.Tool == nil || !got.Tool.Confirm {
		t.Fatalf("request: %+v", got)
	}
}

func has(names ...string) func(string) bool {
	set := map[string]bool{}
	for _, n := range names {
		set[n] = true
	}
	return func(n string) bool { return set[n] }
}

func TestCheckDecisions(t *testing.T) {
	calls := []ToolCall{call("a", "status"), call("b", "deploy")}
	cases := []struct {
		name string
		ds   []Decision
		has  func(string) bool
		want error
	}{
		{"complete", []Decision{Allow("a"), Deny("b", "")}, has("status", "deploy"), nil},
		{"missing", []Decision{Allow("a")}, has("status", "deploy"), ErrMissingDecision},
		{"duplicate", []Decision{Allow("a"), Allow("b"), Deny("b", "")}, has("status", "deploy"), ErrDuplicateDecision},
		{"unknown key", []Decision{Allow("a"), Allow("b"), Allow("c")}, has("status", "deploy"), ErrUnknownCall},
		{"position key of an id call", []Decision{Allow("#0"), Allow("b")}, has("status", "deploy"), ErrUnknownCall},
		{"tool gone", []Decision{Allow("a"), Allow("b")}, has("status"), ErrToolUnavailable},
		{"denied call needs no tool", []Decision{Allow("a"), Deny("b", "")}, has("status"), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckDecisions(calls, tc.ds, tc.has)
			if tc.want == nil && err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestExecuteOrderAndPartialDeny(t *testing.T) {
	// No ids, one duplicate: keys are positions; results keep the model's order.
	calls := []ToolCall{call("", "status"), call("d", "deploy"), call("d", "deploy"), call("", "notify")}
	var ran []string
	run := func(_ context.Context, key string, c ToolCall) (string, error) {
		ran = append(ran, key)
		if c.Name == "notify" {
			return "", errors.New("smtp down")
		}
		return "ok " + key, nil
	}
	ds := []Decision{Deny("#2", "Not on Fridays."), Allow("#0"), Allow("#3"), Deny("#1", "")}
	res, err := Execute(context.Background(), calls, ds, has("status", "deploy", "notify"), run)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ran, []string{"#0", "#3"}) {
		t.Fatalf("ran %v, want only the allowed calls in order", ran)
	}
	want := []Result{
		{Key: "#0", Name: "status", Content: "ok #0"},
		{Key: "#1", CallID: "d", Name: "deploy", Content: DefaultDenyMessage, IsError: true, Denied: true},
		{Key: "#2", CallID: "d", Name: "deploy", Content: "Not on Fridays.", IsError: true, Denied: true},
		{Key: "#3", Name: "notify", Content: "smtp down", IsError: true},
	}
	if !reflect.DeepEqual(res, want) {
		t.Fatalf("results:\n got %+v\nwant %+v", res, want)
	}
}

func TestExecuteRunsNothingWhenARuleIsBroken(t *testing.T) {
	calls := []ToolCall{call("a", "status"), call("b", "deploy")}
	ran := 0
	run := func(context.Context, string, ToolCall) (string, error) { ran++; return "", nil }
	for _, ds := range [][]Decision{
		{Allow("a")},                         // missing
		{Allow("a"), Allow("b"), Allow("x")}, // unknown
	} {
		if _, err := Execute(context.Background(), calls, ds, has("status", "deploy"), run); err == nil {
			t.Fatalf("decisions %v: want an error", ds)
		}
	}
	if _, err := Execute(context.Background(), calls, []Decision{Allow("a"), Allow("b")}, has("status"), run); !errors.Is(err, ErrToolUnavailable) {
		t.Fatalf("err = %v", err)
	}
	if ran != 0 {
		t.Fatalf("%d calls ran although the decisions were rejected", ran)
	}
}

func TestCheckRounds(t *testing.T) {
	if err := CheckRounds(7, 0); err != nil {
		t.Fatalf("7 of default 8: %v", err)
	}
	if err := CheckRounds(8, 0); !errors.Is(err, ErrTooManyRounds) {
		t.Fatalf("8 of default 8: %v", err)
	}
	if err := CheckRounds(2, 2); !errors.Is(err, ErrTooManyRounds) || !strings.Contains(err.Error(), "2 of 2") {
		t.Fatalf("2 of 2: %v", err)
	}
}

func TestDecisionStatusAllowed(t *testing.T) {
	for s, want := range map[DecisionStatus]bool{
		DecisionAllowed: true, DecisionAllowedByPolicy: true, DecisionDenied: false,
		DecisionExpired: false, DecisionPending: false, DecisionInvalid: false,
	} {
		if s.Allowed() != want {
			t.Errorf("%s.Allowed() = %v", s, !want)
		}
	}
}

// A reference carries the revision of the arguments it showed; revision 0
// is written as before revisions existed, so old buttons name it.
func TestRefRevision(t *testing.T) {
	if got := RefAt("abc", 2, 0); got != Ref("abc", 2) || got != "abc.2" {
		t.Fatalf("RefAt at revision 0 = %q", got)
	}
	r, err := ParseCallRef(RefAt("abc", 2, 3))
	if err != nil || r != (CallRef{Batch: "abc", Position: 2, Revision: 3}) {
		t.Fatalf("ParseCallRef(RefAt(abc, 2, 3)) = %+v, %v", r, err)
	}
	if r, err := ParseCallRef("abc.2"); err != nil || r.Revision != 0 {
		t.Fatalf("ParseCallRef of a reference without a revision = %+v, %v", r, err)
	}
	for _, bad := range []string{"abc.2.0", "abc.2.01", "abc.2.", "abc.2.-1", "abc.2.x", "abc.2.3.4", "abc.2.10001"} {
		if _, err := ParseCallRef(bad); err != ErrBadRef {
			t.Errorf("ParseCallRef(%q) = %v, want ErrBadRef", bad, err)
		}
	}
	if id, pos, err := ParseRef(RefAt("abc", 2, 3)); err != nil || id != "abc" || pos != 2 {
		t.Errorf("ParseRef drops the revision: %q %d %v", id, pos, err)
	}
}

func TestApproversNames(t *testing.T) {
	a := Approvers{Users: []string{"U1", "U2"}, Groups: []string{"S1"}, Roles: []string{"42"}}
	if got := strings.Join(a.Names(), ", "); got != "U1, U2, group S1, role 42" {
		t.Fatalf("members %q", got)
	}
	if got := (Approvers{}).Names(); len(got) != 0 {
		t.Fatalf("members of nobody: %q", got)
	}
	if m := a.Names(); &m[0] == &a.Users[0] {
		t.Fatal("Members shares the Users array")
	}
}
