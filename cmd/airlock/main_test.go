package main

import (
	"os"
	"testing"
)

// TestMain runs this test binary as the secrets test's MCP server over
// stdio when that test starts it as one (stdioServerEnv).
func TestMain(m *testing.M) {
	if os.Getenv(stdioServerEnv) != "" {
		serveLeakyStdio() // exits
	}
	os.Exit(m.Run())
}
