package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The hook builds without cgo (no C compiler on a laptop) and holds none
// of Airlock's server: no storage, no SQLite, no chat platform.
func TestBuildsWithoutCgoAndHoldsNoServer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	out := filepath.Join(t.TempDir(), "airlock-hook")
	build := exec.Command("go", "build", "-o", out, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("CGO_ENABLED=0 go build: %v\n%s", err, b)
	}
	deps, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"/storage", "go-sqlite3", "/bot", "/adapters/", "slack-go", "discordgo", "pgx"} {
		for _, d := range strings.Fields(string(deps)) {
			if strings.Contains(d, bad) {
				t.Errorf("airlock-hook depends on %s", d)
			}
		}
	}
}
