package discord

import (
	"strings"
	"testing"

	"github.com/airlockhq/airlock/adapters/internal/adaptertest"
)

// Issue 34 item 19: a runbook step's arguments and the run's parameters
// hold &, < and > as written (never \u0026, \u003c, \u003e); Discord's
// code blocks show them as they are.
func TestRunbookArgumentsShowAsWrittenGolden(t *testing.T) {
	c, r := adaptertest.RunbookStepCard(t, "discord", "123456789012345678", "111111111111111111")
	golden(t, "card_runbook_args_html.json", render(c))
	golden(t, "run_params_html.json", RenderRun(r))
	if s := c.Calls[0].Args + r.Params; strings.Contains(s, `\u00`) {
		t.Fatalf("an escape instead of the character: %s", s)
	}
}
