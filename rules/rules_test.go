package rules

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/keyerr"
)

// Set is used as a confirm policy.
var _ interface {
	Evaluate(confirm.Request) confirm.Verdict
} = (*Set)(nil)

var testNow = time.Date(2025, 3, 14, 9, 26, 53, 0, time.UTC)

func mustCompile(t testing.TB, cfgs ...Config) *Set {
	t.Helper()
	s, err := Compile(cfgs)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return s
}

func req(tool, args string) confirm.Request {
	return confirm.Request{
		Call:      confirm.ToolCall{ID: "c1", Name: tool, Args: json.RawMessage(args)},
		Platform:  "slack",
		Channel:   "C0OPS",
		Requester: "U0ALICE",
		Now:       testNow,
	}
}

func ask(name, when string) Config { return Config{Name: name, When: when, Action: ActionAsk} }

func reason(kind confirm.ReasonKind, rule string) confirm.Reason {
	return confirm.Reason{Kind: kind, Rule: rule}
}

func wantRuleError(t *testing.T, v confirm.Verdict, rule string) {
	t.Helper()
	if !v.Ask || v.Deny || !slices.Contains(v.Reasons, reason(confirm.ReasonRuleError, rule)) {
		t.Fatalf("verdict = %+v, want ask with rule_error %s", v, rule)
	}
}

func wantPass(t *testing.T, v confirm.Verdict) {
	t.Helper()
	if v.Ask || v.Deny || len(v.Reasons) != 0 {
		t.Fatalf("verdict = %+v, want none", v)
	}
}

func TestProductionVsStaging(t *testing.T) {
	s := mustCompile(t, Config{
		Name:      "prod-restarts",
		When:      `tool == "restart_service" && args.environment == "production"`,
		Action:    "ask",
		Approvals: 2,
	})
	v := s.Evaluate(req("restart_service", `{"environment":"production","service":"api"}`))
	want := confirm.Verdict{Ask: true, Approvals: 2, Reasons: []confirm.Reason{reason(confirm.ReasonRule, "prod-restarts")}}
	if !equalVerdict(v, want) {
		t.Fatalf("production: %+v, want %+v", v, want)
	}
	wantPass(t, s.Evaluate(req("restart_service", `{"environment":"staging","service":"api"}`)))
	// Another tool without the key: && short-circuits before the missing key.
	wantPass(t, s.Evaluate(req("get_status", `{}`)))
}

func TestDeny(t *testing.T) {
	s := mustCompile(t,
		Config{Name: "no-drops", When: `tool == "run_sql" && args.sql.lowerAscii().contains("drop ")`, Action: "deny",
			Message: "Schema drops are not allowed from chat."},
		Config{Name: "no-wipe", When: `tool == "wipe"`, Action: "deny"},
	)
	v := s.Evaluate(req("run_sql", `{"sql":"DROP TABLE users"}`))
	if !v.Deny || v.DenyRule != "no-drops" || v.DenyMessage != "Schema drops are not allowed from chat." ||
		!slices.Equal(v.Reasons, []confirm.Reason{reason(confirm.ReasonRule, "no-drops")}) {
		t.Fatalf("with message: %+v", v)
	}
	v = s.Evaluate(req("wipe", `{}`))
	if !v.Deny || v.DenyRule != "no-wipe" || v.DenyMessage != confirm.DefaultRuleDenyMessage("no-wipe") {
		t.Fatalf("without message: %+v", v)
	}
	wantPass(t, s.Evaluate(req("run_sql", `{"sql":"SELECT 1"}`)))
}

func TestDenyWinsOverAsk(t *testing.T) {
	s := mustCompile(t,
		Config{Name: "ask-sql", When: `tool == "run_sql"`, Action: "ask", Approvals: 3},
		Config{Name: "deny-drop", When: `tool == "run_sql" && args.sql.startsWith("DROP")`, Action: "deny"},
	)
	v := s.Evaluate(req("run_sql", `{"sql":"DROP TABLE t"}`))
	if !v.Deny || v.DenyRule != "deny-drop" {
		t.Fatalf("verdict = %+v, want deny by deny-drop", v)
	}
	if !slices.Equal(v.Reasons, []confirm.Reason{reason(confirm.ReasonRule, "ask-sql"), reason(confirm.ReasonRule, "deny-drop")}) {
		t.Fatalf("reasons = %v", v.Reasons)
	}
	v = s.Evaluate(req("run_sql", `{"sql":"SELECT 1"}`))
	if v.Deny || !v.Ask || v.Approvals != 3 {
		t.Fatalf("verdict = %+v, want ask with 3", v)
	}
}

func TestLargestApprovals(t *testing.T) {
	s := mustCompile(t,
		Config{Name: "a", When: `true`, Action: "ask", Approvals: 2},
		Config{Name: "b", When: `tool == "deploy"`, Action: "ask", Approvals: 3},
		Config{Name: "c", When: `tool == "deploy"`, Action: "ask"},
	)
	if v := s.Evaluate(req("deploy", `{}`)); !v.Ask || v.Approvals != 3 || len(v.Reasons) != 3 {
		t.Fatalf("deploy: %+v", v)
	}
	if v := s.Evaluate(req("other", `{}`)); !v.Ask || v.Approvals != 2 || len(v.Reasons) != 1 {
		t.Fatalf("other: %+v", v)
	}
}

func TestRestrictionsFromTwoRules(t *testing.T) {
	s := mustCompile(t,
		Config{Name: "dba", When: `tool == "run_sql"`, Action: "ask", Approvers: []string{"U0DBA"}, ApproverGroups: []string{"S0DBA"}},
		Config{Name: "sre", When: `tool == "run_sql"`, Action: "ask", ApproverRoles: []string{"R0SRE"}},
		Config{Name: "anyone", When: `tool == "run_sql"`, Action: "ask"},
	)
	v := s.Evaluate(req("run_sql", `{}`))
	if len(v.Restrict) != 2 {
		t.Fatalf("Restrict = %+v, want 2 sets", v.Restrict)
	}
	if !slices.Equal(v.Restrict[0].Users, []string{"U0DBA"}) || !slices.Equal(v.Restrict[0].Groups, []string{"S0DBA"}) ||
		!slices.Equal(v.Restrict[1].Roles, []string{"R0SRE"}) || len(v.Restrict[1].Users)+len(v.Restrict[1].Groups) != 0 {
		t.Fatalf("Restrict = %+v", v.Restrict)
	}
}

func TestNotGrantable(t *testing.T) {
	no, yes := false, true
	s := mustCompile(t,
		Config{Name: "pinned", When: `tool == "rotate_keys"`, Action: "ask", Grantable: &no},
		Config{Name: "loose", When: `tool == "restart"`, Action: "ask", Grantable: &yes},
		Config{Name: "default", When: `tool == "scale"`, Action: "ask"},
	)
	if v := s.Evaluate(req("rotate_keys", `{}`)); !v.Ask || !v.NotGrantable {
		t.Fatalf("grantable false: %+v", v)
	}
	for _, tool := range []string{"restart", "scale"} {
		if v := s.Evaluate(req(tool, `{}`)); !v.Ask || v.NotGrantable {
			t.Fatalf("%s: %+v", tool, v)
		}
	}
}

func TestVariables(t *testing.T) {
	cases := []struct {
		when  string
		args  string
		match bool
	}{
		{`platform == "slack"`, `{}`, true},
		{`platform == "discord"`, `{}`, false},
		{`channel == "C0OPS"`, `{}`, true},
		{`user == "U0ALICE"`, `{}`, true},
		{`user in ["U0BOB", "U0CAROL"]`, `{}`, false},
		{`tool == "scale"`, `{}`, true},
		{`now.getHours() >= 0`, `{}`, true},
		{`now.getHours() == 9 && now.getDayOfWeek() == 5`, `{}`, true}, // a Friday, in UTC
		{`now > timestamp("2025-01-01T00:00:00Z")`, `{}`, true},
		{`now.getHours("America/New_York") == 5`, `{}`, true},
		{`has(args.x)`, `{"x":null}`, true},
		{`has(args.x)`, `{"y":1}`, false},
		{`!has(args.x) || args.x == "on"`, `{}`, true},
		{`has(args.opts.force) && args.opts.force == true`, `{"opts":{"force":true}}`, true},
		{`"force" in args`, `{"force":false}`, true},
		{`args.x == null`, `{"x":null}`, true},
		// Numbers: whole numbers are ints, whatever their spelling.
		{`args.replicas > 10`, `{"replicas":12}`, true},
		{`args.replicas > 10`, `{"replicas":12.0}`, true},
		{`args.replicas > 10`, `{"replicas":1.2e1}`, true},
		{`args.replicas > 10`, `{"replicas":9}`, false},
		{`args.replicas > 10`, `{"replicas":10.5}`, true},
		{`args.replicas > 10.0`, `{"replicas":12}`, true},
		{`args.replicas == 12`, `{"replicas":12.0}`, true},
		{`args.replicas == 12.0`, `{"replicas":12}`, true},
		{`type(args.replicas) == int`, `{"replicas":12.0}`, true},
		{`type(args.ratio) == double`, `{"ratio":0.5}`, true},
		{`args.replicas * 2 > 20`, `{"replicas":12.0}`, true},
		{`double(args.ratio) * 2.0 >= 1.0`, `{"ratio":1}`, true},
		{`args.id == 9007199254740993`, `{"id":9007199254740993}`, true},
		{`args.big > 9223372036854775807`, `{"big":10000000000000000000}`, true},
		{`args.tags.exists(t, t == "db")`, `{"tags":["web","db"]}`, true},
		{`size(args.tags) > 1`, `{"tags":["web","db"]}`, true},
		{`args.path.startsWith("/etc/")`, `{"path":"/etc/passwd"}`, true},
		{`args.path.matches("^/srv/[a-z]+$")`, `{"path":"/srv/data"}`, true},
		{`args.name.lowerAscii() == "prod"`, `{"name":"PROD"}`, true},
		{`args.name.split("-")[0] == "prod"`, `{"name":"prod-eu-1"}`, true},
		{`args.nested.list[1].k == "v"`, `{"nested":{"list":[{},{"k":"v"}]}}`, true},
	}
	for _, c := range cases {
		t.Run(c.when+" "+c.args, func(t *testing.T) {
			s := mustCompile(t, ask("r", c.when))
			v := s.Evaluate(req("scale", c.args))
			if slices.Contains(v.Reasons, reason(confirm.ReasonRuleError, "r")) {
				t.Fatalf("evaluation error: %+v", v)
			}
			if v.Ask != c.match {
				t.Fatalf("ask = %v, want %v (%+v)", v.Ask, c.match, v)
			}
		})
	}
}

func TestZeroNowIsTheClock(t *testing.T) {
	s := mustCompile(t, ask("recent", `now > timestamp("2020-01-01T00:00:00Z")`))
	r := req("x", `{}`)
	r.Now = time.Time{}
	if v := s.Evaluate(r); !v.Ask || len(v.Reasons) != 1 || v.Reasons[0].Kind != confirm.ReasonRule {
		t.Fatalf("verdict = %+v", v)
	}
}

func TestEvaluationErrorAsks(t *testing.T) {
	cases := []struct{ name, when, args string }{
		{"missing key", `args.environment == "production"`, `{"service":"api"}`},
		{"missing nested key", `args.a.b == 1`, `{"a":{}}`},
		{"wrong type", `args.environment > 3`, `{"environment":"prod"}`},
		{"field of a string", `args.s.x == 1`, `{"s":"text"}`},
		{"index out of range", `args.l[5] == 1`, `{"l":[1]}`},
		{"int overflow", `args.n + 1 > 0`, `{"n":9223372036854775807}`},
		{"division by zero", `10 / args.n > 1`, `{"n":0}`},
		{"bad regex", `args.s.matches(args.re)`, `{"s":"a","re":"("}`},
		{"mixed arithmetic", `args.n + 0.5 > 1.0`, `{"n":1}`},
		{"bad timezone", `now.getHours(args.tz) == 1`, `{"tz":"Nowhere/Else"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := mustCompile(t, ask("r", c.when))
			v := s.Evaluate(req("t", c.args))
			wantRuleError(t, v, "r")
			if slices.Contains(v.Reasons, reason(confirm.ReasonRule, "r")) {
				t.Fatalf("an error is not a match: %+v", v)
			}
		})
	}
}

func TestDenyRuleErrorAsksNotDenies(t *testing.T) {
	s := mustCompile(t, Config{Name: "no-prod", When: `args.env == "prod"`, Action: "deny"})
	v := s.Evaluate(req("t", `{}`))
	wantRuleError(t, v, "no-prod")
	if v.DenyRule != "" || v.DenyMessage != "" {
		t.Fatalf("verdict = %+v", v)
	}
	if !v.NotGrantable {
		t.Fatalf("a deny rule that could not be evaluated must not be covered by a grant: %+v", v)
	}
}

func TestRuleErrorKeepsTheRulesTerms(t *testing.T) {
	no := false
	s := mustCompile(t, Config{Name: "strict", When: `args.env == "prod"`, Action: "ask",
		Approvals: 2, Approvers: []string{"U0DBA"}, Grantable: &no})
	v := s.Evaluate(req("t", `{}`))
	wantRuleError(t, v, "strict")
	if v.Approvals != 2 || len(v.Restrict) != 1 || !v.NotGrantable {
		t.Fatalf("an error must not loosen the rule: %+v", v)
	}
}

func TestInvalidArgs(t *testing.T) {
	s := mustCompile(t,
		ask("uses-args", `tool == "other" && args.x == 1`),
		ask("no-args", `tool == "t"`),
		ask("not-t", `tool == "nope"`),
	)
	for _, args := range []string{
		`{`, `not json`, `[1,2]`, `"str"`, `null`, `42`, `{"x":1} {"x":2}`, `{"x":1}x`,
		`{"x":1,"x":2}`, `{"a":{"k":1,"k":1}}`, "{\"x\":\"\xff\"}",
		strings.Repeat("[", 20000) + strings.Repeat("]", 20000),
	} {
		t.Run(trunc(args), func(t *testing.T) {
			v := s.Evaluate(req("t", args))
			wantRuleError(t, v, "uses-args")
			want := []confirm.Reason{reason(confirm.ReasonRuleError, "uses-args"), reason(confirm.ReasonRule, "no-args")}
			if !slices.Equal(v.Reasons, want) {
				t.Fatalf("reasons = %v, want %v", v.Reasons, want)
			}
		})
	}
	for _, args := range []string{``, `  `, `{}`, ` {"x":2} `, `{"a":[{"k":1},{"k":1}]}`} {
		t.Run("valid "+args, func(t *testing.T) {
			v := s.Evaluate(req("t", args))
			if !slices.Equal(v.Reasons, []confirm.Reason{reason(confirm.ReasonRule, "no-args")}) {
				t.Fatalf("verdict = %+v", v)
			}
		})
	}
}

func TestHostileArgs(t *testing.T) {
	s := mustCompile(t,
		Config{Name: "prod", When: `tool == "restart_service" && args.environment == "production"`, Action: "ask", Approvals: 2},
		ask("always", `true`),
	)
	huge := strings.Repeat("production", 200_000) // 2 MB
	deep := strings.Repeat(`{"a":`, 5000) + `1` + strings.Repeat(`}`, 5000)
	cases := []struct {
		name, args string
		prod       bool
	}{
		{"huge string", `{"environment":"` + huge + `"}`, false},
		{"huge key", `{"` + huge + `":1,"environment":"production"}`, true},
		{"deeply nested", `{"environment":"production","n":` + deep + `}`, true},
		{"deeply nested environment", `{"environment":` + deep + `}`, false},
		{"CEL syntax", `{"environment":"production\" || true || \""}`, false},
		{"CEL syntax 2", `{"environment":"') || true || ('"}`, false},
		{"CEL expression", `{"environment":"args.environment == \"production\""}`, false},
		{"escaped production", `{"environment":"\u0070roduction"}`, true},
		{"many keys", manyKeys(20000), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			v := s.Evaluate(req("restart_service", c.args))
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %v", d)
			}
			if !v.Ask || v.Deny {
				t.Fatalf("verdict = %+v, want ask", v)
			}
			if got := slices.Contains(v.Reasons, reason(confirm.ReasonRule, "prod")); got != c.prod {
				t.Fatalf("prod matched = %v, want %v (%+v)", got, c.prod, v)
			}
			if slices.Contains(v.Reasons, reason(confirm.ReasonRuleError, "prod")) {
				t.Fatalf("unexpected rule error: %+v", v)
			}
		})
	}
}

func manyKeys(n int) string {
	var b strings.Builder
	b.WriteString(`{`)
	for i := range n {
		fmt.Fprintf(&b, `"k%d":%d,`, i, i)
	}
	b.WriteString(`"environment":"production"}`)
	return b.String()
}

func TestExpensiveExpressionAsks(t *testing.T) {
	list := "[" + strings.TrimSuffix(strings.Repeat("1,", 3000), ",") + "]"
	cases := []struct{ name, when, args string }{
		{"nested all", `args.list.all(x, args.list.all(y, x == y)) == false`, `{"list":` + list + `}`},
		{"nested exists", `args.list.exists(x, args.list.exists(y, x != y))`, `{"list":` + list + `}`},
		{"map of maps", `args.list.map(x, args.list.map(y, x + y)).size() == 0`, `{"list":` + list + `}`},
		{"string blowup", `args.list.map(x, args.s + args.s + args.s).size() == 0`,
			`{"list":` + list + `,"s":"` + strings.Repeat("x", 100_000) + `"}`},
		{"string concatenation", `args.s + args.s + args.s + args.s != ""`,
			`{"s":"` + strings.Repeat("x", 1_000_000) + `"}`},
		{"string comparison", `args.list.all(x, args.s <= args.t)`,
			`{"list":` + list + `,"s":"` + strings.Repeat("x", 100_000) + `","t":"` + strings.Repeat("x", 100_000) + `"}`},
		{"in a long list", `args.list.all(x, 1 in args.list)`, `{"list":` + list + `}`},
		{"contains on a huge string", `args.s.contains(args.t)`,
			`{"s":"` + strings.Repeat("x", 1_000_000) + `","t":"` + strings.Repeat("y", 1000) + `"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := mustCompile(t, Config{Name: "costly", When: c.when, Action: "deny"})
			start := time.Now()
			v := s.Evaluate(req("t", c.args))
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("took %v", d)
			}
			wantRuleError(t, v, "costly")
			// The rule stopped at a limit, not at some other error.
			args, err := decodeArgs([]byte(c.args))
			if err != nil {
				t.Fatal(err)
			}
			_, err = s.rules[0].eval(map[string]any{
				"tool": "t", "platform": "", "channel": "", "user": "", "now": testNow, "args": args,
			})
			if err == nil || !strings.Contains(err.Error(), "cost limit") && !strings.Contains(err.Error(), "interrupted") {
				t.Fatalf("eval error = %v, want a limit", err)
			}
			t.Logf("%v", err)
		})
	}
}

// Deep equality costs CEL one unit per top-level element, so only the
// wall-clock bound stops this one.
func TestWallClockBound(t *testing.T) {
	inner := "[" + strings.TrimSuffix(strings.Repeat("1,", 50_000), ",") + "]"
	list := "[" + strings.TrimSuffix(strings.Repeat("1,", 2000), ",") + "]"
	args := `{"list":` + list + `,"a":[` + inner + `],"b":[` + inner + `]}`
	s := mustCompile(t, ask("slow", `args.list.all(x, args.a == args.b)`))
	start := time.Now()
	v := s.Evaluate(req("t", args))
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %v", d)
	}
	wantRuleError(t, v, "slow")
	decoded, err := decodeArgs([]byte(args))
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.rules[0].eval(map[string]any{"tool": "t", "platform": "", "channel": "", "user": "", "now": testNow, "args": decoded})
	if err == nil || !strings.Contains(err.Error(), "deadline exceeded") {
		t.Fatalf("eval error = %v, want the deadline", err)
	}
}

func TestConcurrentEvaluate(t *testing.T) {
	s := mustCompile(t,
		Config{Name: "prod", When: `args.environment == "production"`, Action: "ask", Approvals: 2},
		Config{Name: "deny", When: `args.environment == "forbidden"`, Action: "deny"},
	)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 50 {
				env := []string{"production", "staging", "forbidden"}[(i+j)%3]
				v := s.Evaluate(req("t", `{"environment":"`+env+`"}`))
				if (env == "production") != (v.Ask && v.Approvals == 2) || (env == "forbidden") != v.Deny {
					t.Errorf("%s: %+v", env, v)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestNilAndEmptySet(t *testing.T) {
	var nilSet *Set
	if v := nilSet.Evaluate(req("t", `{}`)); !equalVerdict(v, confirm.Verdict{}) {
		t.Fatalf("nil set: %+v", v)
	}
	if nilSet.Len() != 0 || nilSet.Names() != nil {
		t.Fatal("nil set has rules")
	}
	s, err := Compile(nil)
	if err != nil || s == nil || s.Len() != 0 || len(s.Names()) != 0 {
		t.Fatalf("Compile(nil) = %v, %v", s, err)
	}
	if v := s.Evaluate(req("t", `not json`)); !equalVerdict(v, confirm.Verdict{}) {
		t.Fatalf("empty set: %+v", v)
	}
}

func TestNamesAndLen(t *testing.T) {
	s := mustCompile(t, ask("b", "true"), ask("a", "false"), Config{Name: "c-1_x", When: "true", Action: "deny"})
	if s.Len() != 3 || !slices.Equal(s.Names(), []string{"b", "a", "c-1_x"}) {
		t.Fatalf("Len = %d, Names = %v", s.Len(), s.Names())
	}
}

var position = regexp.MustCompile(`\b\d+:\d+\b`)

func TestCompileErrors(t *testing.T) {
	yes := true
	ok := ask("ok", "true")
	cases := []struct {
		name   string
		cfgs   []Config
		key    string
		substr []string
		pos    bool // the message shows a CEL line:column
	}{
		{"syntax", []Config{ask("r", `tool ==`)}, "confirmation.rules[0].when", []string{"Syntax error"}, true},
		{"syntax second rule", []Config{ok, ask("r", "tool == \n  (")}, "confirmation.rules[1].when", nil, true},
		{"not bool", []Config{ask("r", `tool`)}, "confirmation.rules[0].when", []string{"string", "bool"}, false},
		{"dyn is not bool", []Config{ask("r", `args.flag`)}, "confirmation.rules[0].when", []string{"dyn", "bool"}, false},
		{"int", []Config{ask("r", `1 + 2`)}, "confirmation.rules[0].when", []string{"int"}, false},
		{"unknown variable", []Config{ask("r", `tool == "x" && environment == "production"`)}, "confirmation.rules[0].when",
			[]string{"undeclared reference", "environment"}, true},
		{"unknown function", []Config{ask("r", `launch(tool)`)}, "confirmation.rules[0].when", []string{"launch"}, true},
		{"type mismatch", []Config{ask("r", `tool == 1`)}, "confirmation.rules[0].when", []string{"no matching overload"}, true},
		{"empty when", []Config{ask("r", ``)}, "confirmation.rules[0].when", []string{"required"}, false},
		{"blank when", []Config{ask("r", "  \n")}, "confirmation.rules[0].when", []string{"required"}, false},
		{"duplicate name", []Config{ok, ask("x", "true"), ask("ok", "false")}, "confirmation.rules[2].name",
			[]string{`"ok"`, "confirmation.rules[0]"}, false},
		{"missing name", []Config{ok, ask("", "true")}, "confirmation.rules[1].name", []string{"required"}, false},
		{"bad name upper", []Config{ask("Prod", "true")}, "confirmation.rules[0].name", []string{`"Prod"`}, false},
		{"bad name space", []Config{ask("prod restarts", "true")}, "confirmation.rules[0].name", nil, false},
		{"bad name dot", []Config{ask("prod.restarts", "true")}, "confirmation.rules[0].name", nil, false},
		{"missing action", []Config{{Name: "r", When: "true"}}, "confirmation.rules[0].action", []string{"required"}, false},
		{"bad action", []Config{{Name: "r", When: "true", Action: "allow"}}, "confirmation.rules[0].action", []string{`"allow"`}, false},
		{"action case", []Config{{Name: "r", When: "true", Action: "Ask"}}, "confirmation.rules[0].action", nil, false},
		{"approvals with deny", []Config{{Name: "r", When: "true", Action: "deny", Approvals: 2}}, "confirmation.rules[0].approvals",
			[]string{"ask"}, false},
		{"approvals negative", []Config{{Name: "r", When: "true", Action: "ask", Approvals: -1}}, "confirmation.rules[0].approvals", nil, false},
		{"approvals too many", []Config{{Name: "r", When: "true", Action: "ask", Approvals: 11}}, "confirmation.rules[0].approvals",
			[]string{"10"}, false},
		{"approvers with deny", []Config{{Name: "r", When: "true", Action: "deny", Approvers: []string{"U1"}}},
			"confirmation.rules[0].approvers", nil, false},
		{"approver_groups with deny", []Config{{Name: "r", When: "true", Action: "deny", ApproverGroups: []string{"S1"}}},
			"confirmation.rules[0].approver_groups", nil, false},
		{"approver_roles with deny", []Config{{Name: "r", When: "true", Action: "deny", ApproverRoles: []string{"R1"}}},
			"confirmation.rules[0].approver_roles", nil, false},
		{"grantable with deny", []Config{{Name: "r", When: "true", Action: "deny", Grantable: &yes}},
			"confirmation.rules[0].grantable", nil, false},
		{"empty approver", []Config{{Name: "r", When: "true", Action: "ask", Approvers: []string{"U1", ""}}},
			"confirmation.rules[0].approvers[1]", []string{"empty"}, false},
		{"empty role", []Config{{Name: "r", When: "true", Action: "ask", ApproverRoles: []string{" "}}},
			"confirmation.rules[0].approver_roles[0]", nil, false},
		{"message with ask", []Config{{Name: "r", When: "true", Action: "ask", Message: "no"}}, "confirmation.rules[0].message",
			[]string{"deny"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := Compile(c.cfgs)
			if err == nil {
				t.Fatalf("Compile = %v, want an error", s.Names())
			}
			var e *keyerr.Error
			if !errors.As(err, &e) || e.Key != c.key || e.Err == nil {
				t.Fatalf("error = %#v (%v), want key %s", err, err, c.key)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, c.key+": ") || errors.Unwrap(err) != e.Err {
				t.Fatalf("error = %q", msg)
			}
			for _, sub := range c.substr {
				if !strings.Contains(msg, sub) {
					t.Errorf("error %q lacks %q", msg, sub)
				}
			}
			if c.pos && !position.MatchString(msg) {
				t.Errorf("error %q shows no line:column", msg)
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("error %q spans lines", msg)
			}
		})
	}
}

func TestSyntaxErrorPosition(t *testing.T) {
	_, err := Compile([]Config{ask("r", "tool == \"x\" &&\n  args.a ==")})
	if err == nil || !strings.Contains(err.Error(), "confirmation.rules[0].when: 2:") {
		t.Fatalf("error = %v, want a position on line 2", err)
	}
}

// FuzzEvaluate: no arguments make Evaluate panic, and a rule that always
// matches always asks (or denies), whatever the other rules do.
func FuzzEvaluate(f *testing.F) {
	for _, seed := range []string{
		`{}`, ``, `{"environment":"production","replicas":12}`, `{"replicas":12.0}`, `{"x":1,"x":2}`,
		`{"list":[1,2,3],"s":"a"}`, `not json`, `[1]`, `null`, `{"a":{"b":{"c":[{"d":null}]}}}`,
		`{"s":"\" || true || \""}`, "{\"s\":\"\xff\"}", `{"n":1e400}`, `{"n":-0}`, `{"n":9223372036854775808}`,
	} {
		f.Add([]byte(seed))
	}
	s := mustCompile(f,
		ask("always", `true`),
		Config{Name: "prod", When: `has(args.environment) && args.environment == "production"`, Action: "ask", Approvals: 2},
		Config{Name: "missing", When: `args.environment == "production"`, Action: "ask"},
		Config{Name: "replicas", When: `args.replicas > 10`, Action: "deny"},
		Config{Name: "loop", When: `has(args.list) && args.list.all(x, args.list.all(y, x == y))`, Action: "ask"},
		Config{Name: "strings", When: `args.s.lowerAscii().contains("drop")`, Action: "deny"},
	)
	f.Fuzz(func(t *testing.T, args []byte) {
		v := s.Evaluate(confirm.Request{
			Call: confirm.ToolCall{Name: "t", Args: args}, Platform: "slack", Channel: "C1", Requester: "U1", Now: testNow,
		})
		if !v.Ask && !v.Deny {
			t.Fatalf("verdict = %+v for %q: weaker than ask", v, args)
		}
		if !slices.Contains(v.Reasons, reason(confirm.ReasonRule, "always")) {
			t.Fatalf("rule always did not match: %+v", v)
		}
		if v.Deny && v.DenyRule == "" {
			t.Fatalf("deny without a rule: %+v", v)
		}
	})
}

func equalVerdict(a, b confirm.Verdict) bool {
	return fmt.Sprintf("%#v", a) == fmt.Sprintf("%#v", b)
}

func trunc(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// A rule's risk rates the calls it matches; the highest of the rules and
// the tool's wins. A bad tier, or a tier on a deny rule, is refused naming
// the key.
func TestRuleRisk(t *testing.T) {
	s := mustCompile(t,
		Config{Name: "prod", When: `args.env == "production"`, Action: "ask", Risk: "critical"},
		Config{Name: "any", When: `tool == "deploy"`, Action: "ask", Risk: "low"},
	)
	if v := s.Evaluate(req("deploy", `{"env":"production"}`)); v.Risk != confirm.RiskCritical {
		t.Fatalf("production: %+v", v)
	}
	if v := s.Evaluate(req("deploy", `{"env":"staging"}`)); v.Risk != confirm.RiskLow {
		t.Fatalf("staging: %+v", v)
	}
	tool := &confirm.ToolInfo{Name: "deploy", Confirm: true, Risk: confirm.RiskHigh}
	r := req("deploy", `{"env":"staging"}`)
	r.Tool = tool
	if v := confirm.NewPolicy(true, nil, s).Evaluate(r); v.Risk != confirm.RiskHigh {
		t.Fatalf("the tool's high and a rule's low: %+v", v)
	}
	for _, c := range []struct {
		cfg Config
		key string
	}{
		{Config{Name: "x", When: `true`, Action: "ask", Risk: "extreme"}, "confirmation.rules[0].risk"},
		{Config{Name: "x", When: `true`, Action: "deny", Risk: "high"}, "confirmation.rules[0].risk"},
	} {
		_, err := Compile([]Config{c.cfg})
		var ke *keyerr.Error
		if !errors.As(err, &ke) || ke.Key != c.key {
			t.Fatalf("%+v: %v, want an error naming %s", c.cfg, err, c.key)
		}
	}
}

// A rule may name the gateway client that asked; Airlock's own agent is
// client "", so a client's rule never asks about it; MayAsk, not knowing
// the client, counts the rule as one that may ask.
func TestClientVariable(t *testing.T) {
	s := mustCompile(t, Config{Name: "alice-force-push", When: `tool == "Bash" && client == "alice-laptop" && args.command.matches("git push.*--force")`,
		Action: "ask", Approvals: 2})
	r := req("Bash", `{"command":"git push origin main --force"}`)
	wantPass(t, s.Evaluate(r))
	r.Client = "alice-laptop"
	if v := s.Evaluate(r); !v.Ask || v.Approvals != 2 {
		t.Fatalf("alice's force push: %+v", v)
	}
	if !s.MayAsk(confirm.Request{Call: confirm.ToolCall{Name: "Bash"}}) {
		t.Fatal("MayAsk: a rule on the client does not count as one that may ask")
	}
}
