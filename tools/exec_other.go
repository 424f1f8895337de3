//go:build !unix

package tools

import "os/exec"

// setProcessGroup is a no-op where process groups don't exist: cancellation
// kills the process only.
func setProcessGroup(*exec.Cmd) {}
