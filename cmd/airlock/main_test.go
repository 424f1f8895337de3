package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"testing"
)

// TestMain runs this test binary as the bench's Airlock process when
// airlock bench (under test) starts it as one (see startBenchServer).
func TestMain(m *testing.M) {
	if os.Getenv(benchServerEnv) != "" && len(os.Args) > 1 && os.Args[1] == benchServerCmd {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}
