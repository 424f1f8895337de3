package main

import (
	"os"
	"testing"
)

// TestMain runs this test binary as the bench's Airlock process when
// airlock bench (under test) starts it as one (see startBenchServer).
func TestMain(m *testing.M) {
	if os.Getenv(stdioServerEnv) != "" {
		serveLeakyStdio() // exits
	}
	if os.Getenv(benchServerEnv) != "" && len(os.Args) > 1 && os.Args[1] == benchServerCmd {
		main() // exits
	}
	os.Exit(m.Run())
}
