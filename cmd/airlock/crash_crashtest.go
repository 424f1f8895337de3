//go:build crashtest

package main

import (
	"os"
	"syscall"
)

// In a crashtest build, AIRLOCK_CRASH_AT=<point> kills the process with
// SIGKILL when the bot reaches that point ("decided", "claimed", "ran").
func init() {
	at := os.Getenv("AIRLOCK_CRASH_AT")
	if at == "" {
		return
	}
	crashTrace = func(point string) {
		if point == at {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
	}
}
