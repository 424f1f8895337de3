package main

import (
	"os"
	"testing"

	"github.com/airlockhq/airlock/internal/bench"
)

// TestMain runs this test binary as the bench's Airlock process when
// airlock bench (under test) starts it as one (see internal/bench).
func TestMain(m *testing.M) {
	if os.Getenv(stdioServerEnv) != "" {
		serveLeakyStdio() // exits
	}
	if os.Getenv(bench.ServerEnv) != "" && len(os.Args) > 1 && os.Args[1] == bench.ServerCommand {
		main() // exits
	}
	os.Exit(m.Run())
}
