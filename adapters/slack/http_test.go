package slack

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/confirm"
)

func jsonHeader() http.Header { return http.Header{"Content-Type": {"application/json"}} }
func formHeader() http.Header {
	return http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
}

// Forged and stale signatures get 401 and nothing happens; a valid
// signature with a wrong verification token is accepted (the token is
// ignored).
func TestHTTPSignatures(t *testing.T) {
	w := newWorld(t, ModeHTTP)
	w.model.PushText("Hello.").PushText("Hello again.")
	body, _ := json.Marshal(mention(w.eventID(), chanOps, bob, mentionTS, "", "<@"+botUser+"> hi"))

	// Unsigned.
	if code, _ := w.post(body, jsonHeader(), false, time.Now()); code != http.StatusUnauthorized {
		t.Errorf("unsigned: HTTP %d, want 401", code)
	}
	// Forged: signed with another secret.
	forged := http.Header{"Content-Type": {"application/json"}}
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	forged.Set(headerTimestamp, ts)
	forged.Set(headerSignature, fmt.Sprintf("v0=%x", Sign("not-the-secret", ts, body)))
	if code, _ := w.post(body, forged, false, time.Now()); code != http.StatusUnauthorized {
		t.Errorf("forged: HTTP %d, want 401", code)
	}
	// Signed, then the body changed.
	tampered := http.Header{"Content-Type": {"application/json"}}
	tampered.Set(headerTimestamp, ts)
	tampered.Set(headerSignature, fmt.Sprintf("v0=%x", Sign(testSecret, ts, body)))
	if code, _ := w.post(append(body[:len(body)-1:len(body)-1], ' ', '}'), tampered, false, time.Now()); code != http.StatusUnauthorized {
		t.Errorf("tampered body: HTTP %d, want 401", code)
	}
	// Stale: a valid signature six minutes old, and one from the future.
	if code, _ := w.post(body, jsonHeader(), true, time.Now().Add(-6*time.Minute)); code != http.StatusUnauthorized {
		t.Errorf("stale: HTTP %d, want 401", code)
	}
	if code, _ := w.post(body, jsonHeader(), true, time.Now().Add(6*time.Minute)); code != http.StatusUnauthorized {
		t.Errorf("future: HTTP %d, want 401", code)
	}
	// A forged click changes nothing either.
	click, _ := json.Marshal(blockAction(alice, chanOps, mentionTS, ActionAllow, "abcdef.0"))
	form := []byte(url.Values{"payload": {string(click)}}.Encode())
	if code, _ := w.post(form, formHeader(), false, time.Now()); code != http.StatusUnauthorized {
		t.Errorf("unsigned click: HTTP %d, want 401", code)
	}
	w.ad.Wait()
	if n := len(w.model.Requests()); n != 0 {
		t.Fatalf("rejected requests reached the model (%d requests)", n)
	}
	if n := len(w.fake.callsTo("chat.postMessage")) + len(w.fake.callsTo("chat.postEphemeral")); n != 0 {
		t.Fatalf("rejected requests posted %d messages", n)
	}
	if evs := w.audit(confirm.AuditRejectedClick); len(evs) != 0 {
		t.Fatalf("an unsigned click reached the bot: %+v", evs)
	}

	// The same body, validly signed but carrying a wrong verification
	// token: accepted, the token is ignored.
	ev := mention(w.eventID(), chanOps, bob, "1700000000.000900", "", "<@"+botUser+"> hi")
	ev["token"] = "definitely-not-the-verification-token"
	w.deliverEvent(ev, 0)
	w.waitText(chanOps, "Hello.")
	w.ad.Wait()
	if n := len(w.model.Requests()); n != 1 {
		t.Fatalf("model got %d requests, want 1", n)
	}
}

func TestHTTPURLVerification(t *testing.T) {
	w := newWorld(t, ModeHTTP)
	body := []byte(`{"token":"whatever","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`)
	code, resp := w.post(body, jsonHeader(), true, time.Now())
	if code != http.StatusOK {
		t.Fatalf("HTTP %d %s", code, resp)
	}
	var got struct{ Challenge string }
	if err := json.Unmarshal([]byte(resp), &got); err != nil || got.Challenge != "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" {
		t.Fatalf("answer %q", resp)
	}
	if code, _ := w.post(body, jsonHeader(), false, time.Now()); code != http.StatusUnauthorized {
		t.Errorf("unsigned url_verification: HTTP %d, want 401", code)
	}
}

// Malformed or unknown payloads get 400 and change nothing.
func TestHTTPRejectsBadPayloads(t *testing.T) {
	w := newWorld(t, ModeHTTP)
	w.model.PushCalls(tc("call_deploy", "deploy", `{"service":"api"}`)).PushText("Deployed.")
	w.deliverEvent(mention(w.eventID(), chanOps, bob, mentionTS, "", "<@"+botUser+"> deploy"), 0)
	ref := refByStyle(t, w.waitCard(1), "primary")
	w.ad.Wait()

	interaction := func(p map[string]any) []byte {
		raw, _ := json.Marshal(p)
		return []byte(url.Values{"payload": {string(raw)}}.Encode())
	}
	unknown := blockAction(alice, chanOps, mentionTS, "airlock_launch_missiles", ref)
	noUser := blockAction("", chanOps, mentionTS, ActionAllow, ref)
	badRef := blockAction(alice, chanOps, mentionTS, ActionAllow, "deploy {\"service\":\"api\"}")
	noChannel := blockAction(alice, "", mentionTS, ActionAllow, ref)
	delete(noChannel["container"].(map[string]any), "channel_id")
	noReason := viewSubmission(alice, `{"ref":"`+ref+`","channel":"`+chanOps+`"}`, "x")
	delete(noReason["view"].(map[string]any), "state")
	badMeta := viewSubmission(alice, `not json`, "x")
	shortcut := map[string]any{"type": "shortcut", "user": map[string]any{"id": alice}, "callback_id": "x"}
	noEventID := mention("", chanOps, bob, mentionTS, "", "<@"+botUser+"> deploy")
	noChannelEvent := mention(w.eventID(), "", bob, mentionTS, "", "<@"+botUser+"> deploy")
	eventJSON := func(p map[string]any) []byte { b, _ := json.Marshal(p); return b }

	for name, tc := range map[string]struct {
		body []byte
		h    http.Header
		want int
	}{
		"unknown action id":      {interaction(unknown), formHeader(), 400},
		"no user":                {interaction(noUser), formHeader(), 400},
		"value not a reference":  {interaction(badRef), formHeader(), 400},
		"no channel":             {interaction(noChannel), formHeader(), 400},
		"submission w/o reason":  {interaction(noReason), formHeader(), 400},
		"bad private metadata":   {interaction(badMeta), formHeader(), 400},
		"unsupported type":       {interaction(shortcut), formHeader(), 400},
		"malformed payload JSON": {[]byte("payload=%7Bnot+json"), formHeader(), 400},
		"slash command":          {[]byte("command=%2Fairlock&text=hi&user_id=UALICE"), formHeader(), 400},
		"malformed event JSON":   {[]byte(`{"type":"event_callback",`), jsonHeader(), 400},
		"event without id":       {eventJSON(noEventID), jsonHeader(), 400},
		"mention w/o channel":    {eventJSON(noChannelEvent), jsonHeader(), 400},
		"challenge missing":      {[]byte(`{"type":"url_verification"}`), jsonHeader(), 400},
		"other content type":     {[]byte(`hello`), http.Header{"Content-Type": {"text/plain"}}, 415},
	} {
		if code, resp := w.post(tc.body, tc.h, true, time.Now()); code != tc.want {
			t.Errorf("%s: HTTP %d (%s), want %d", name, code, strings.TrimSpace(resp), tc.want)
		}
	}
	// GET is not allowed.
	resp, err := http.Get(w.events.URL + "/slack/events")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET: HTTP %d", resp.StatusCode)
	}
	w.ad.Wait()
	if w.tools["deploy"].runs.Load() != 0 || len(w.model.Requests()) != 1 || len(w.fake.callsTo("chat.update")) != 0 {
		t.Fatal("a rejected payload changed something")
	}
	// Events we do not handle are acknowledged and ignored.
	other := eventCallback(w.eventID(), map[string]any{"type": "reaction_added", "user": alice, "reaction": "thumbsup"})
	if code, _ := w.post(eventJSON(other), jsonHeader(), true, time.Now()); code != http.StatusOK {
		t.Errorf("reaction_added: HTTP %d, want 200", code)
	}
}

// In socket mode a malformed envelope is acked, logged and ignored.
func TestSocketModeIgnoresBadEnvelopes(t *testing.T) {
	w := newWorld(t, ModeSocket)
	w.model.PushCalls(tc("call_deploy", "deploy", `{"service":"api"}`))
	w.deliverEvent(mention(w.eventID(), chanOps, bob, mentionTS, "", "<@"+botUser+"> deploy"), 0)
	ref := refByStyle(t, w.waitCard(1), "primary")
	w.ad.Wait()
	for _, env := range []struct {
		typ     string
		payload any
	}{
		{"interactive", blockAction(alice, chanOps, mentionTS, "airlock_launch_missiles", ref)},
		{"interactive", []byte(`{"type":"block_actions","user":{"id":"UALICE"},"actions":"nope"}`)},
		{"interactive", []byte(`"just a string"`)},
		{"events_api", []byte(`{"type":"event_callback","event_id":"Ev9","event":{"type":"app_mention","user":"UBOB","text":"<@UBOT> hi"}}`)},
		{"events_api", []byte(`[1,2,3]`)},
	} {
		id := w.fake.sendEnvelope(env.typ, env.payload, 0)
		waitFor(t, "ack of "+id, func() bool { return w.fake.acked(id) })
	}
	w.ad.Wait()
	if w.tools["deploy"].runs.Load() != 0 || len(w.model.Requests()) != 1 || len(w.fake.callsTo("chat.update")) != 0 {
		t.Fatal("a bad envelope changed something")
	}
	if !strings.Contains(w.logs.String(), "unknown action_id") {
		t.Errorf("no log line for the unknown action id:\n%s", w.logs.String())
	}
	// The connection survived: a good click still works.
	w.deliverInteraction(blockAction(alice, chanOps, mentionTS, ActionAllow, ref))
	waitFor(t, "deploy", func() bool { return w.tools["deploy"].runs.Load() == 1 })
}
