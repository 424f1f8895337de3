package config

import (
	"strings"
	"testing"
)

func TestMaxCallsPerReply(t *testing.T) {
	c, err := Parse([]byte(minimal), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Model.MaxCallsPerReply != 32 {
		t.Fatalf("model.max_calls_per_reply default: %d, want 32", c.Model.MaxCallsPerReply)
	}
	c, err = Parse([]byte(minimal+"  max_calls_per_reply: 500\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Model.MaxCallsPerReply != 500 {
		t.Fatalf("model.max_calls_per_reply: %d, want 500", c.Model.MaxCallsPerReply)
	}
	_, err = Parse([]byte(minimal+"  max_calls_per_reply: -1\n"), env(nil))
	if err == nil || !strings.Contains(err.Error(), "model.max_calls_per_reply") {
		t.Fatalf("a negative limit: %v, want an error naming model.max_calls_per_reply", err)
	}
}
