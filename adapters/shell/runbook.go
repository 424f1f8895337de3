package shell

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/airlockhq/airlock/adapters/internal/visible"
	"github.com/airlockhq/airlock/bot"
)

var _ bot.RunMessenger = (*Shell)(nil)

var runSeq atomic.Int64

// PostRun prints a runbook run's message; a terminal cannot edit what it
// printed, so each update prints the message again.
func (s *Shell) PostRun(_ context.Context, _ bot.Thread, text string) (string, error) {
	s.printRun(text)
	return fmt.Sprintf("run-%d", runSeq.Add(1)), nil
}

// UpdateRun prints the run message again, as it now stands.
func (s *Shell) UpdateRun(_ context.Context, _ bot.Thread, _ string, text string) error {
	s.printRun(text)
	return nil
}

func (s *Shell) printRun(text string) {
	var sb strings.Builder
	for i, line := range strings.Split(visible.RevealProse(text), "\n") {
		if i == 0 {
			sb.WriteString("=== " + line + "\n")
			continue
		}
		sb.WriteString("  " + line + "\n")
	}
	s.printf("%s", sb.String())
}
