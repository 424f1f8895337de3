package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/internal/bench"
)

// TestMain runs this test binary as the bench's Airlock process when
// airlock-lab bench (under test) starts it as one (see internal/bench).
func TestMain(m *testing.M) {
	if os.Getenv(bench.ServerEnv) != "" && len(os.Args) > 1 && os.Args[1] == bench.ServerCommand {
		main() // exits
	}
	os.Exit(m.Run())
}

// Every command the usage lists is dispatched (each refuses a bad flag
// with 2, naming it); the hidden bench-server is dispatched but not
// listed; anything else is an unknown command.
func TestLabCommands(t *testing.T) {
	for _, args := range [][]string{
		{"soak", "-nosuchflag"},
		{"soak", "-chaos", "-nosuchflag"},
		{"bench", "-nosuchflag"},
		{bench.ServerCommand, "-nosuchflag"},
	} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), args, nil, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "-nosuchflag") {
			t.Errorf("%v: exit %d, stderr %q; want 2 naming the flag", args, code, errOut.String())
		}
		if args[0] != bench.ServerCommand && !strings.Contains(usage, "airlock-lab "+args[0]) {
			t.Errorf("the usage does not list %s", args[0])
		}
	}
	if strings.Contains(usage, bench.ServerCommand) {
		t.Errorf("the usage lists the hidden %s", bench.ServerCommand)
	}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"run"}, nil, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), `unknown command "run"`) {
		t.Errorf("run: exit %d, stderr %q; want 2, an unknown command", code, errOut.String())
	}
}
