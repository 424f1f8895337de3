package shell

import (
	"strings"
	"testing"

	"github.com/airlockhq/airlock/adapters/internal/adaptertest"
)

// Issue 34 item 19: a runbook step's arguments and the run's parameters
// hold &, < and > as written (never \u0026, \u003c, \u003e): the card
// and the run message show exactly what runs.
func TestRunbookArgumentsShowAsWrittenGolden(t *testing.T) {
	c, r := adaptertest.RunbookStepCard(t, Platform, DefaultChannel, DefaultUser)
	var out strings.Builder
	s := New(strings.NewReader(""), &out)
	s.printRun(r.Text())
	golden(t, "card_runbook_args_html.txt", Render(c)+out.String())
	if strings.Contains(out.String()+Render(c), `\u00`) {
		t.Fatalf("an escape instead of the character:\n%s%s", Render(c), out.String())
	}
}
