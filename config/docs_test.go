package config

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// configKeys are the keys a configuration file may hold, as paths
// ("tools[].http.url"), walked from Config's yaml tags the way checkKeys
// walks a file: a struct's tagged fields, a list's elements ("[]"), a
// pointer's target. A map (headers, env, a JSON Schema) and any other
// value are one key: what they hold is free. A struct type met again at
// another path (a runbook's on_failure steps are steps; a preview's exec
// is a tool's exec) is that path alone: its keys are the ones already
// listed.
func configKeys() []string {
	var keys []string
	seen := map[reflect.Type]bool{}
	var walk func(t reflect.Type, path string)
	walk = func(t reflect.Type, path string) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch {
		case t.Kind() == reflect.Slice && t.Elem().Kind() != reflect.Uint8:
			if e := t.Elem(); e.Kind() == reflect.Struct || (e.Kind() == reflect.Pointer && e.Elem().Kind() == reflect.Struct) {
				walk(e, path+"[]")
				return
			}
		case t.Kind() == reflect.Struct && t != reflect.TypeOf(time.Time{}):
			if seen[t] {
				keys = append(keys, path)
				return
			}
			seen[t] = true
			if path != "" {
				keys = append(keys, path) // a section: documented as a row of its own, or by its keys
			}
			for i := 0; i < t.NumField(); i++ {
				name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
				if name == "" || name == "-" {
					continue
				}
				walk(t.Field(i).Type, join(path, name))
			}
			return
		}
		keys = append(keys, path)
	}
	walk(reflect.TypeOf(Config{}), "")
	return keys
}

// docKey is the key a row of docs/configuration.md's tables documents:
// its first cell, a code span.
var docKey = regexp.MustCompile("(?m)^\\| `([a-z_][a-z0-9_.\\[\\]]*)` \\|")

// Every key a configuration file may hold has a row in
// docs/configuration.md, and every row names a key that exists: a key
// added without its documentation, or documentation of a key that is
// gone, fails here. A section (a struct: `audit.checkpoint_every`) needs
// no row of its own when its keys have theirs.
func TestEveryConfigKeyIsDocumented(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range docKey.FindAllStringSubmatch(string(data), -1) {
		documented[m[1]] = true
	}
	keys := configKeys()
	if len(keys) < 100 {
		t.Fatalf("walked %d keys from Config; the walk is broken", len(keys))
	}
	for _, k := range keys {
		if documented[k] {
			continue
		}
		section := slices.ContainsFunc(keys, func(other string) bool {
			return strings.HasPrefix(other, k+".") || strings.HasPrefix(other, k+"[].")
		})
		if section && slices.ContainsFunc(keys, func(other string) bool {
			return documented[other] && (strings.HasPrefix(other, k+".") || strings.HasPrefix(other, k+"[]."))
		}) {
			continue
		}
		t.Errorf("config key %s has no row in docs/configuration.md", k)
	}
	for k := range documented {
		if !slices.Contains(keys, k) {
			t.Errorf("docs/configuration.md documents %s, which is no config key", k)
		}
	}
}
