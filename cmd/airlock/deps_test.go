package main

import (
	"os/exec"
	"path"
	"strings"
	"testing"
)

// modulePath is the main module's path.
const modulePath = "github.com/airlockhq/airlock"

// lab are the packages of the lab and the tests' machinery that the
// airlock binary must not hold (besides any package named *test and any
// of this module that imports "testing"): the bench and the chaos soak,
// their command, and the fakes and proxies they and the tests run.
var lab = []string{
	"internal/bench",
	"internal/chaos",
	"internal/tcpproxy",
	"internal/testkit",
	"internal/pgtest",
	"internal/racetest",
	"cmd/airlock-lab",
}

// The airlock binary is the product alone: the bench, the chaos soak, the
// fake Slack, the TCP proxy and the other tests' kits live beside it
// (cmd/airlock-lab), not in it.
func TestBinaryHoldsNoLab(t *testing.T) {
	goTool, err := exec.LookPath("go") // go test puts its own go first on PATH
	if err != nil {
		t.Fatalf("the go tool: %v", err)
	}
	out, err := exec.Command(goTool, "list", "-deps", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	forbidden := map[string]bool{}
	for _, p := range lab {
		forbidden[modulePath+"/"+p] = true
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, " ")
		seen[pkg] = true
		if pkg != modulePath && !strings.HasPrefix(pkg, modulePath+"/") {
			continue
		}
		switch name := path.Base(pkg); {
		case forbidden[pkg]:
			t.Errorf("the airlock binary holds %s, a package of the lab", pkg)
		case strings.HasSuffix(name, "test") || strings.HasSuffix(name, "testkit"):
			t.Errorf("the airlock binary holds %s, a fake or test kit", pkg)
		case strings.Contains(" "+imports+" ", " testing "):
			t.Errorf("the airlock binary holds %s, which imports testing", pkg)
		}
	}
	// The list is the binary's: it holds the command and its storage.
	for _, p := range []string{modulePath + "/cmd/airlock", modulePath + "/storage", modulePath + "/adapters/slack"} {
		if !seen[p] {
			t.Fatalf("go list -deps . lacks %s:\n%s", p, out)
		}
	}
}
