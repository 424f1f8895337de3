package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The name storage/nocgo.go refers to when cgo is off; the compiler's
// "undefined:" error shows it.
const noCgoMarker = "airlock_needs_cgo__install_gcc_and_build_with_CGO_ENABLED_1"

// Without a C compiler the go command silently turns cgo off; the build
// must then fail with an error naming the cause (cgo, gcc), first, rather
// than only with "undefined: sqlite3.Error".
func TestBuildWithoutCgoNamesTheCause(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go tool is not on PATH: cannot try a build without cgo")
	}
	root := repoRoot(t)
	check := func(t *testing.T, env ...string) {
		t.Helper()
		// The storage package is where a build of ./cmd/airlock stops
		// without cgo; building it alone keeps this test cheap on a cold
		// cache (the whole binary without cgo is another full build).
		cmd := exec.Command(goTool, "build", "-buildvcs=false", "./storage")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Fatalf("go build with %v succeeded; want it to fail naming cgo:\n%s", env, out)
		}
		first := firstErrorLine(string(out))
		t.Logf("%v: first error: %s", env, first)
		if !strings.Contains(first, noCgoMarker) {
			t.Errorf("go build with %v: the first error does not name the cause (want %q):\n%s", env, noCgoMarker, out)
		}
		for _, word := range []string{"cgo", "gcc", "CGO_ENABLED_1"} {
			if !strings.Contains(first, word) {
				t.Errorf("first error %q does not say %q", first, word)
			}
		}
	}
	t.Run("CGO_ENABLED=0", func(t *testing.T) { check(t, "CGO_ENABLED=0") })

	// As a machine without gcc: PATH holds only the go tool's directory,
	// and CGO_ENABLED and CC are unset, so the go command decides cgo is
	// off by itself.
	t.Run("no C compiler on PATH", func(t *testing.T) {
		goDir := filepath.Dir(goTool)
		for _, cc := range []string{"gcc", "cc", "clang"} {
			if _, err := os.Stat(filepath.Join(goDir, cc)); err == nil {
				t.Skipf("%s is beside the go tool in %s: cannot hide the C compiler", cc, goDir)
			}
		}
		check(t, "PATH="+goDir, "CGO_ENABLED=", "CC=")
	})
}

// firstErrorLine is the first line of go build's output that is not a
// "# package" header.
func firstErrorLine(out string) string {
	for _, line := range strings.Split(out, "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			return line
		}
	}
	return ""
}

// repoRoot is the module's root: the directory above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("no go.mod at %s: %v", root, err)
	}
	return root
}
