package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
)

func TestSoakEveryStormRunsOnce(t *testing.T) {
	var out, errOut bytes.Buffer
	args := []string{"soak", "-storms", "15", "-clicks", "20"}
	if code := run(context.Background(), args, nil, &out, &errOut); code != 0 {
		t.Fatalf("soak (sqlite): exit %d\n%s%s", code, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "1 run(s): 15 storms") {
		t.Fatalf("output:\n%s", out.String())
	}
	if dsn := os.Getenv("AIRLOCK_TEST_POSTGRES_DSN"); dsn != "" {
		out.Reset()
		args := []string{"soak", "-storms", "15", "-clicks", "20", "-driver", "postgres", "-dsn", dsn}
		if code := run(context.Background(), args, nil, &out, &errOut); code != 0 {
			t.Fatalf("soak (postgres): exit %d\n%s%s", code, out.String(), errOut.String())
		}
	}
}

func TestSoakRejectsBadFlags(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"soak", "-storms", "0"}, nil, &out, &errOut); code != 2 {
		t.Fatalf("exit %d", code)
	}
}
