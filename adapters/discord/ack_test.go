package discord

import (
	"sync"
	"testing"
	"time"
)

type ackRecorder struct {
	mu   sync.Mutex
	acks []string
}

func (r *ackRecorder) Ack(platform string, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if d >= 0 {
		r.acks = append(r.acks, platform)
	}
}

func (r *ackRecorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.acks)
}

// TestAckRecorded: each interaction's response (here a refusal of a
// button Airlock did not issue, and a deferral) is recorded as an ack.
func TestAckRecorded(t *testing.T) {
	h := newHarness(t)
	rec := &ackRecorder{}
	h.a.cfg.Metrics = rec
	h.start()
	h.fd.Send("INTERACTION_CREATE", click("8501", channelID, moderator, []string{modRole}, "someone-elses-button", "1"))
	h.callback("8501")
	h.fd.Send("INTERACTION_CREATE", click("8502", channelID, moderator, []string{modRole}, "al:a:nosuchbatch.0", "1"))
	h.callback("8502")
	deadline := time.Now().Add(10 * time.Second)
	for rec.count() < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.acks) != 2 || rec.acks[0] != Platform || rec.acks[1] != Platform {
		t.Fatalf("acks %v, want two for %q", rec.acks, Platform)
	}
}
