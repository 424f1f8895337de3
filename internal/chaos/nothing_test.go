package chaos

import (
	"bufio"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// doNothingEnv makes the test binary, started as the soak starts
// Airlock (`run -config FILE`), a process that answers 200 to every
// request and does nothing else.
const doNothingEnv = "AIRLOCK_CHAOS_DO_NOTHING"

func TestMain(m *testing.M) {
	if os.Getenv(doNothingEnv) != "" && len(os.Args) == 4 && os.Args[1] == "run" {
		doNothing(os.Args[3])
	}
	os.Exit(m.Run())
}

// doNothing serves 200 on the config's listen address until killed.
func doNothing(config string) {
	f, err := os.Open(config)
	if err != nil {
		os.Exit(3)
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if addr, ok := strings.CutPrefix(sc.Text(), "listen: "); ok {
			_ = http.ListenAndServe(addr, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
		}
	}
	os.Exit(3)
}

// TestDoNothingFailsTheSoak: a process that acknowledges every mention
// and click with 200 and does nothing (no card, no click, no decision)
// fails the soak: it saw too little to mean anything, and every mention
// acknowledged went unanswered. (Its 3 seconds leave no time for the
// kill asked for: that fails too.)
func TestDoNothingFailsTheSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(doNothingEnv, "1")
	o := Options{Exe: exe, Driver: "sqlite", Conversations: 3, Duration: 3 * time.Second, Seed: 1, KillEvery: 2 * time.Second,
		Timeout: 5 * time.Second, Settle: 5 * time.Second, MinCards: 3, MinClicks: 3, MinDecisions: 3, MinKills: 1,
		cardWait: 300 * time.Millisecond, quiet: 200 * time.Millisecond}
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	rep, err := Soak(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(rep.Violations, "\n")
	for _, want := range []string{"-min-cards", "-min-clicks", "-min-decisions", "-min-kills", "acknowledged and never answered"} {
		if !strings.Contains(got, want) {
			t.Errorf("the do-nothing process: no violation %q in\n%s", want, got)
		}
	}
	if rep.Acked == 0 || rep.Cards != 0 {
		t.Fatalf("the do-nothing process acknowledged %d mentions and showed %d cards", rep.Acked, rep.Cards)
	}
}

// Without -airlock the soak builds the airlock binary from the checkout
// it runs in; run outside one, it says so and names -airlock.
func TestBuildOutsideACheckoutNamesTheFlag(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv("GOFLAGS", "")
	t.Setenv("GOPROXY", "off")
	_, err := buildAirlock(t.Context(), dir)
	if err == nil || !strings.Contains(err.Error(), "-airlock") || !strings.Contains(err.Error(), airlockPackage) {
		t.Fatalf("a build outside a checkout: %v; want an error naming %s and -airlock", err, airlockPackage)
	}
}
