package shell

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/airlockhq/airlock/adapters/internal/visible"
	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/card"
)

var _ bot.RunMessenger = (*Shell)(nil)

var runSeq atomic.Int64

// PostRun prints a runbook run's message; a terminal cannot edit what it
// printed, so each update prints the message again.
func (s *Shell) PostRun(_ context.Context, _ bot.Thread, r card.Run) (string, error) {
	s.showRun(r)
	return fmt.Sprintf("run-%d", runSeq.Add(1)), nil
}

// UpdateRun prints the run message again, as it now stands, unless this
// terminal printed it so last: an edit that changes nothing shows
// nothing (a run's message is rendered at every change of the run, and
// two may render one state).
func (s *Shell) UpdateRun(_ context.Context, _ bot.Thread, _ string, r card.Run) error {
	s.showRun(r)
	return nil
}

func (s *Shell) showRun(r card.Run) {
	text := r.Text()
	s.mu.Lock()
	if s.runs == nil {
		s.runs = map[string]string{}
	}
	same := s.runs[r.ID] == text
	s.runs[r.ID] = text
	s.mu.Unlock()
	if !same {
		s.printRun(text)
	}
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
