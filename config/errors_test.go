package config

import (
	"errors"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/rules"
)

var update = flag.Bool("update", false, "rewrite testdata/errors.golden")

// Every invalid file's error is a *Error naming the key, and its message
// is the one users have seen (testdata/errors.golden, word for word).
func TestErrorMessagesAreKeyErrors(t *testing.T) {
	var got strings.Builder
	check := func(name, src, key string) {
		_, err := Parse([]byte(src), env(nil))
		if err == nil {
			t.Errorf("%s: no error", name)
			return
		}
		var ke *Error
		if !errors.As(err, &ke) || ke.Key != key || err.Error() != key+": "+ke.Err.Error() {
			t.Errorf("%s: %T %q is not an *Error naming %s", name, err, err, key)
		}
		got.WriteString(name + "\t" + err.Error() + "\n")
	}
	for _, tc := range keyCases {
		check(tc.name, tc.src, tc.key)
	}
	const golden = "testdata/errors.golden"
	if *update {
		if err := os.WriteFile(golden, []byte(got.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != string(want) {
		gl, wl := strings.Split(got.String(), "\n"), strings.Split(string(want), "\n")
		for i := 0; i < len(gl) && i < len(wl); i++ {
			if gl[i] != wl[i] {
				t.Errorf("message changed:\n got  %s\n want %s", gl[i], wl[i])
			}
		}
		if len(gl) != len(wl) {
			t.Errorf("%d messages, golden has %d", len(gl)-1, len(wl)-1)
		}
	}
}

// Validate only checks: it compiles no rule (Parse does, after it) and
// leaves the config as it was; a rule that parses but does not compile
// passes Validate and still fails Parse, naming its key.
func TestValidateCompilesNothing(t *testing.T) {
	c, err := Parse([]byte(minimal+"confirmation: {rules: [{name: a, when: 'tool == \"x\"', action: ask}]}\n"), env(nil))
	if err != nil || c.Confirmation.RuleSet().Len() != 1 {
		t.Fatalf("Parse: %v", err)
	}
	plain := *c
	plain.Confirmation.compiled = nil
	if err := plain.Validate(); err != nil {
		t.Fatal(err)
	}
	if plain.Confirmation.RuleSet() != nil {
		t.Fatal("Validate compiled the rules")
	}
	plain.Confirmation.Rules = []rules.Config{{Name: "a", When: "tool ==", Action: "ask"}}
	if err := plain.Validate(); err != nil {
		t.Fatalf("Validate reported what only compiling finds: %v", err)
	}
}
