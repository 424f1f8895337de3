package main

import (
	"bytes"
	"context"
	"os"
	"slices"
	"strings"
	"testing"
)

// The usage made from the command table says, word for word, what the
// hand-written one said (testdata/usage-before.txt; only the columns may
// differ).
func TestUsageKeepsItsWords(t *testing.T) {
	before, err := os.ReadFile("testdata/usage-before.txt")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Fields(usage), strings.Fields(string(before)); !slices.Equal(got, want) {
		t.Errorf("usage changed:\n%s\nwant the words of:\n%s", usage, before)
	}
}

// Every command in the table is listed once in the usage and dispatched by
// its name.
func TestCommandTable(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range commands {
		if seen[c.name] || c.run == nil {
			t.Errorf("%q: twice in the table, or no run func", c.name)
		}
		seen[c.name] = true
		listed := 0
		for _, line := range strings.Split(usage, "\n") {
			if strings.HasPrefix(strings.Join(strings.Fields(line), " "), "airlock "+c.name+" "+c.args) {
				listed++
			}
		}
		if listed != 1 {
			t.Errorf("%q is listed %d times in the usage", c.name, listed)
		}
		var out, errOut bytes.Buffer
		_ = run(context.Background(), []string{c.name, "-h"}, nil, &out, &errOut)
		if strings.Contains(errOut.String(), "unknown command") {
			t.Errorf("%q is not dispatched: %s", c.name, errOut.String())
		}
	}
}
