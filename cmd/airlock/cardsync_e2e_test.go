package main

import (
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/model/modeltest"
)

// shows reports whether every message that carried the allow button now
// shows the final state of its card on the fake Slack: no Allow button,
// both voters named.
func (s *slackAPI) showsFinal(allow string, voters ...string) (bool, string) {
	for _, at := range messagesOf(allow) {
		c, ok := s.fake.Shown(at.channel, at.ts)
		if !ok {
			return false, at.channel + " not shown"
		}
		blocks := c.Param("blocks")
		if strings.Contains(blocks, `"airlock_allow"`) {
			return false, at.channel + " still shows Allow"
		}
		for _, v := range voters {
			if !strings.Contains(blocks, v) {
				return false, at.channel + " does not name " + v
			}
		}
	}
	return true, ""
}

// TestCardSyncRateLimitedQuorum drives a real `airlock run` (Slack HTTP
// mode, SQLite) whose fake Slack rate-limits chat.update as Slack's
// Tier 3 does (its window scaled down to two seconds, the limit to 25, so
// one vote's updates overrun it; Retry-After as Slack sends it): a quorum
// card in the thread with a copy in each of 25 approvers' DMs gets two
// votes while Slack is slow to answer. Every copy ends in the final
// state, with fewer chat.update calls than votes × copies: updates are
// coalesced and a 429 holds them until Retry-After. Every click is
// acknowledged at once and the deploy runs once.
func TestCardSyncRateLimitedQuorum(t *testing.T) {
	skipShort(t)
	api := newSlackAPI(t)
	tools := newToolServer(t)
	model := callingModel(t, modeltest.OpenAIToolCall{ID: "c1", Name: "deploy", Arguments: `{"service":"web"}`})
	dir := t.TempDir()
	addr := freeAddr(t)
	var approvers []string
	for i := 1; i <= 25; i++ {
		approvers = append(approvers, fmt.Sprintf("U%02d", i))
	}
	path := writeConfig(t, dir, fmt.Sprintf(`
%s
channels:
  - {platform: slack, id: COPS, approvers: [%s], notify: [dm]}
confirmation: {timeout: 1h, approvals: 2}
tools:
%s
`, slackRunHead(addr, "sqlite", filepath.Join(dir, "airlock.db"), model.BaseURL(), api.URL+"/api/"), strings.Join(approvers, ", "), deployToolYAML(tools.URL, "service")))
	startRun(t, path)
	waitReady(t, addr)
	if code, err := postSigned(addr, mentionBody("EvSync1", "1800000050.000001", "", "deploy web"), "application/json"); err != nil || code != 200 {
		t.Fatalf("mention: %d %v", code, err)
	}
	var allow string
	waitUntil(t, "the card and its 25 DM copies", func() bool {
		if vs := api.buttons("airlock_allow"); len(vs) > 0 {
			allow = vs[0]
		}
		return allow != "" && len(messagesOf(allow)) == 26
	})
	api.fake.Limit("chat.update", 25, 2*time.Second)
	release := api.fake.Hold("chat.update") // Slack slow to answer
	press := func(user string) {
		t.Helper()
		if code, err := postSigned(addr, actionBodyOn(messagesOf(allow)[0], user, "airlock_allow", allow), "application/x-www-form-urlencoded"); err != nil || code != 200 {
			t.Fatalf("click: %d %v", code, err)
		}
	}
	press("U01")
	waitUntil(t, "the first vote's updates sent", func() bool { return api.fake.Held("chat.update") > 0 })
	press("U02") // acknowledged although the first vote's updates hang
	waitUntil(t, "the quorum decides and the deploy runs", func() bool { return tools.countPrefix("/deploy/") == 1 })
	release()
	waitUntil(t, "every copy in the final state", func() bool { ok, _ := api.showsFinal(allow, "U01", "U02"); return ok })
	if api.fake.Limited("chat.update") == 0 {
		t.Fatal("the rate limit never answered 429: the test does not test it")
	}
	votes, copies := 2, 25
	if n := len(api.updates()); n >= votes*copies {
		t.Fatalf("%d chat.update calls for %d votes on %d copies: not coalesced", n, votes, copies)
	}
	if n := tools.countPrefix("/deploy/"); n != 1 {
		t.Fatalf("the deploy ran %d times", n)
	}
	t.Logf("%d chat.update calls (%d answered 429) for %d votes on %d copies and the card", len(api.updates()), api.fake.Limited("chat.update"), votes, copies)
}

// TestCardSyncSlackDownAcrossRestart drives a real `airlock run` (Slack
// HTTP mode, SQLite): Slack answers chat.update with 503 from just before
// a decision; the deploy runs and its result is recorded, the card stays
// as it was (stale, never wrong); Airlock is killed; Slack answers again;
// the restarted process brings the card to the final state by itself.
func TestCardSyncSlackDownAcrossRestart(t *testing.T) {
	skipShort(t)
	api := newSlackAPI(t)
	tools := newToolServer(t)
	model := callingModel(t, modeltest.OpenAIToolCall{ID: "c1", Name: "deploy", Arguments: `{"service":"web"}`})
	dir := t.TempDir()
	addr := freeAddr(t)
	path := writeConfig(t, dir, fmt.Sprintf(`
%s
channels: [{platform: slack, id: COPS, approvers: [UALICE]}]
tools:
%s
`, slackRunHead(addr, "sqlite", filepath.Join(dir, "airlock.db"), model.BaseURL(), api.URL+"/api/"), deployToolYAML(tools.URL, "service")))
	cmd, _ := startRun(t, path)
	waitReady(t, addr)
	if code, err := postSigned(addr, mentionBody("EvSync2", "1800000051.000001", "", "deploy web"), "application/json"); err != nil || code != 200 {
		t.Fatalf("mention: %d %v", code, err)
	}
	waitUntil(t, "the card", func() bool { return api.allowValue() != "" })
	allow := api.allowValue()
	card := messagesOf(allow)[0]
	api.fake.Down("chat.update", http.StatusServiceUnavailable)
	if code, err := postSigned(addr, clickBody("UALICE", allow), "application/x-www-form-urlencoded"); err != nil || code != 200 {
		t.Fatalf("click: %d %v", code, err)
	}
	waitUntil(t, "the deploy runs and the model continues", func() bool {
		for _, s := range api.texts() {
			if strings.Contains(s, "model saw:") {
				return tools.countPrefix("/deploy/") == 1
			}
		}
		return false
	})
	waitUntil(t, "an update tried and refused", func() bool { return len(api.updates()) > 0 })
	if c, _ := api.fake.Shown(card.channel, card.ts); !strings.Contains(c.Param("blocks"), `"airlock_allow"`) {
		t.Fatal("the card changed while Slack was down")
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	api.fake.Down("chat.update", 0)
	startRun(t, path)
	waitReady(t, addr)
	waitUntil(t, "the card converges after the restart", func() bool { ok, _ := api.showsFinal(allow, "UALICE"); return ok })
	if n := tools.countPrefix("/deploy/"); n != 1 {
		t.Fatalf("the deploy ran %d times", n)
	}
	out, err := exec.Command(airlockBinary(t), "audit", "-config", path, "-json").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "UALICE") {
		t.Fatalf("audit: %v\n%s", err, out)
	}
}
