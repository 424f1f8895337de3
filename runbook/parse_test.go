package runbook

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseCommand(t *testing.T) {
	for text, want := range map[string]struct {
		name string
		args map[string]string
	}{
		"restart":                  {"restart", map[string]string{}},
		"  restart  service=api  ": {"restart", map[string]string{"service": "api"}},
		`restart service=api reason="disk full on db-3"`: {"restart", map[string]string{"service": "api", "reason": "disk full on db-3"}},
		`restart a="say \"hi\"\\n" b=''`:                 {"restart", map[string]string{"a": `say "hi"\n`, "b": ""}},
		`restart a="x\ny" b='it\s'`:                      {"restart", map[string]string{"a": "x\ny", "b": `it\s`}},
		"restart reason=“disk full”":                     {"restart", map[string]string{"reason": "disk full"}},
		"restart url=http://x/?a=b&c=d":                  {"restart", map[string]string{"url": "http://x/?a=b&c=d"}},
		"restart\tservice=api\nenv=prod":                 {"restart", map[string]string{"service": "api", "env": "prod"}},
		"restart empty=":                                 {"restart", map[string]string{"empty": ""}},
	} {
		name, args, err := ParseCommand(text)
		if err != nil || name != want.name || !reflect.DeepEqual(args, want.args) {
			t.Errorf("%q: %q %q %v", text, name, args, err)
		}
	}
}

func TestParseCommandErrors(t *testing.T) {
	for text, want := range map[string]string{
		"":                "which runbook",
		"service=api":     "name first",
		"restart api":     `"api": write parameters as key=value`,
		"restart a=1 a=2": "a is given twice",
		`restart a="open`: "not closed",
		`restart a="x"y`:  "followed by a space",
		`restart a=x"y"`:  "quote the whole value",
		`restart a="\q"`:  `\q is not an escape`,
		`restart a="\`:    "lone backslash",
		"restart =x":      "without its key",
		"restart k!y=1":   "not a parameter name",
		"restart a=\xff":  "UTF-8",
		"restart " + strings.Repeat("a", MaxCommandBytes): "longer than",
	} {
		_, _, err := ParseCommand(text)
		if err == nil || !errors.Is(err, ErrSyntax) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v (want …%s…)", text, err, want)
		}
	}
}

var quoter = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\t", `\t`)

// What parses, re-quoted, parses to the same; nothing panics.
func FuzzParseCommand(f *testing.F) {
	for _, s := range []string{
		`restart service=api reason="disk full on db-3"`,
		`r a="\"\\\n\t" b='x' c=“y”`,
		`r a=1 a=2`, `r "`, `r a="x`, `=`, ``, `r a=\`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		name, args, err := ParseCommand(text)
		if err != nil {
			return
		}
		var b strings.Builder
		b.WriteString(name)
		for k, v := range args {
			b.WriteString(" " + k + `="` + quoter.Replace(v) + `"`)
		}
		name2, args2, err := ParseCommand(b.String())
		if err != nil || name2 != name || !reflect.DeepEqual(args, args2) {
			t.Fatalf("%q → %q %q → %q: %q %q %v", text, name, args, b.String(), name2, args2, err)
		}
	})
}
