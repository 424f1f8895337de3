package slack

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/slack-go/slack"

	"github.com/airlockhq/airlock/bot"
	cardpkg "github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
)

var self = identity{UserID: botUser, BotID: "BBOT", TeamID: "T0TEST"}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func TestClassify(t *testing.T) {
	withSubtype := func(p map[string]any, k string, v any) map[string]any {
		p["event"].(map[string]any)[k] = v
		return p
	}
	for _, tc := range []struct {
		name   string
		body   map[string]any
		kind   actionKind
		thread string
		text   string
	}{
		{"mention at top level: its own ts", mention("Ev1", chanOps, bob, "1.000100", "", "<@UBOT> deploy api"), actTurn, "1.000100", "deploy api"},
		{"mention in a thread: the thread", mention("Ev1", chanOps, bob, "2.000200", "1.000100", "hey <@UBOT|airlock> deploy"), actTurn, "1.000100", "hey deploy"},
		{"other mentions kept", mention("Ev1", chanOps, bob, "1.1", "", "<@UBOT> ask <@UALICE>"), actTurn, "1.1", "ask <@UALICE>"},
		{"DM top level: the DM's conversation", message("Ev1", dmBob, "im", bob, "3.1", "", "hi"), actTurn, "", "hi"},
		{"DM thread", message("Ev1", dmBob, "im", bob, "3.2", "3.1", "<@UBOT> hi"), actTurn, "3.1", "hi"},
		{"thread chatter: aside", message("Ev1", chanOps, "channel", alice, "4.2", "4.1", "wait <@UALICE>"), actNote, "4.1", "wait <@UALICE>"},
		{"private channel chatter: aside", message("Ev1", "G0PRIV", "group", alice, "4.2", "4.1", "hm"), actNote, "4.1", "hm"},
		{"channel mention message: app_mention handles it", message("Ev1", chanOps, "channel", alice, "4.2", "4.1", "<@UBOT> go"), actIgnore, "", ""},
		{"new private channel (C id) mention message: app_mention handles it", message("Ev1", "C0PRIV", "group", alice, "4.2", "", "<@UBOT> go"), actIgnore, "", ""},
		{"group DM mention: a DM turn in its own thread", message("Ev1", "G0GROUP", "mpim", alice, "5.1", "", "<@UBOT> go"), actTurn, "5.1", "go"},
		{"group DM mention in a thread", message("Ev1", "G0GROUP", "mpim", alice, "5.2", "5.1", "again <@UBOT>"), actTurn, "5.1", "again"},
		{"group DM app_mention: its message.mpim twin handles it", mention("Ev1", "G0GROUP", alice, "5.1", "", "<@UBOT> go"), actIgnore, "", ""},
		{"group DM thread chatter: aside", message("Ev1", "G0GROUP", "mpim", alice, "5.3", "5.1", "hm"), actNote, "5.1", "hm"},
		{"group DM top level: ignored", message("Ev1", "G0GROUP", "mpim", alice, "5.4", "", "lunch?"), actIgnore, "", ""},
		{"legacy private channel (G id) mention message: a channel turn", message("Ev1", "G0PRIV", "group", alice, "6.1", "", "<@UBOT> go"), actTurn, "6.1", "go"},
		{"legacy private channel app_mention: its message.groups twin handles it", mention("Ev1", "G0PRIV", alice, "6.1", "", "<@UBOT> go"), actIgnore, "", ""},
		{"app_mention in a DM: message.im handles it", mention("Ev1", dmBob, bob, "6.1", "", "<@UBOT> go"), actIgnore, "", ""},
		{"channel top level: ignored", message("Ev1", chanOps, "channel", alice, "4.1", "", "lunch?"), actIgnore, "", ""},
		{"bot message", withSubtype(message("Ev1", chanOps, "channel", alice, "4.2", "4.1", "x"), "bot_id", "B2"), actIgnore, "", ""},
		{"own message", message("Ev1", dmBob, "im", botUser, "4.2", "", "x"), actIgnore, "", ""},
		{"edit", withSubtype(message("Ev1", dmBob, "im", bob, "4.2", "", "x"), "subtype", "message_changed"), actIgnore, "", ""},
		{"delete", withSubtype(message("Ev1", dmBob, "im", bob, "4.2", "", "x"), "subtype", "message_deleted"), actIgnore, "", ""},
		{"broadcast reply is a person's", withSubtype(message("Ev1", chanOps, "channel", alice, "4.2", "4.1", "x"), "subtype", "thread_broadcast"), actNote, "4.1", "x"},
		{"reaction", eventCallback("Ev1", map[string]any{"type": "reaction_added", "user": alice}), actIgnore, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := parseEvent(mustJSON(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			act, err := classify(req, self)
			if err != nil {
				t.Fatal(err)
			}
			if act.Kind != tc.kind {
				t.Fatalf("kind %d (%s), want %d", act.Kind, act.Why, tc.kind)
			}
			if tc.kind == actIgnore {
				return
			}
			ev := tc.body["event"].(map[string]any)
			want := bot.Turn{Platform: Platform, Channel: ev["channel"].(string), Thread: tc.thread, User: ev["user"].(string), Text: tc.text,
				DM: ev["channel_type"] == "im" || ev["channel_type"] == "mpim" || strings.HasPrefix(ev["channel"].(string), "D")}
			if !reflect.DeepEqual(act.Turn, want) {
				t.Errorf("turn %+v, want %+v", act.Turn, want)
			}
			if act.EventID != "Ev1" {
				t.Errorf("event id %q", act.EventID)
			}
		})
	}
}

func TestParseEventErrors(t *testing.T) {
	for name, body := range map[string]string{
		"not JSON":         `{`,
		"array":            `[]`,
		"no type":          `{}`,
		"no challenge":     `{"type":"url_verification"}`,
		"no event id":      `{"type":"event_callback","event":{"type":"app_mention"}}`,
		"no event":         `{"type":"event_callback","event_id":"Ev1"}`,
		"null event":       `{"type":"event_callback","event_id":"Ev1","event":null}`,
		"event not object": `{"type":"event_callback","event_id":"Ev1","event":"x"}`,
		"event no type":    `{"type":"event_callback","event_id":"Ev1","event":{}}`,
	} {
		if _, err := parseEvent([]byte(body)); !errors.Is(err, errBadEvent) {
			t.Errorf("%s: err %v", name, err)
		}
	}
	for name, body := range map[string]map[string]any{
		"no channel":      mention("Ev1", "", bob, "1.1", "", "<@UBOT> x"),
		"bad channel":     mention("Ev1", "#ops", bob, "1.1", "", "<@UBOT> x"),
		"no ts":           mention("Ev1", chanOps, bob, "", "", "<@UBOT> x"),
		"bad thread":      mention("Ev1", chanOps, bob, "1.1", "yesterday", "<@UBOT> x"),
		"DM without ts":   message("Ev1", dmBob, "im", bob, "", "", "x"),
		"chatter bad chn": message("Ev1", "x", "channel", bob, "1.1", "1.0", "x"),
	} {
		req, err := parseEvent(mustJSON(body))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := classify(req, self); !errors.Is(err, errBadEvent) {
			t.Errorf("%s: classify err %v", name, err)
		}
	}
}

func TestParseInteraction(t *testing.T) {
	ref := "abcdefgh.1"
	in, err := parseInteraction(mustJSON(blockAction(alice, chanOps, mentionTS, ActionAllow, ref)))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, interaction{Interaction: bot.Interaction{Platform: Platform, Kind: cardpkg.ActAllow, User: alice, Channel: chanOps, Thread: mentionTS, Message: chanOps + "/" + anyCardTS, Ref: ref},
		Team: "T0TEST", TriggerID: "12345.98765.abcd2358fdea"}) {
		t.Errorf("allow: %+v", in)
	}
	in, _ = parseInteraction(mustJSON(blockAction(alice, dmBob, "", ActionDeny, ref)))
	if in.Kind != cardpkg.ActDeny || in.Channel != dmBob || in.Thread != "" {
		t.Errorf("deny in a DM: %+v", in)
	}
	meta := ModalMeta{Ref: ref, Channel: chanOps, Thread: mentionTS, Message: chanOps + "/1800000000.000007"}.encode()
	in, err = parseInteraction(mustJSON(viewSubmission(alice, meta, " because \n")))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, interaction{Interaction: bot.Interaction{Platform: Platform, Kind: cardpkg.ActDenyReason, Submit: true, User: alice, Channel: chanOps, Thread: mentionTS,
		Message: chanOps + "/1800000000.000007", Ref: ref, Value: "because"}, Team: "T0TEST", TriggerID: "12345.98765.ffff"}) {
		t.Errorf("submission: %+v", in)
	}
	// A deny-reason modal opened before the card message was kept still
	// decodes, without the message (the bot refuses it).
	old := ModalMeta{Ref: ref, Channel: chanOps, Thread: mentionTS}.encode()
	if in, err := parseInteraction(mustJSON(viewSubmission(alice, old, "x"))); err != nil || in.Message != "" || in.Kind != cardpkg.ActDenyReason || !in.Submit {
		t.Errorf("old metadata: %+v %v", in, err)
	}
	noTrigger := blockAction(alice, chanOps, mentionTS, ActionDenyReason, ref)
	delete(noTrigger, "trigger_id")
	otherView := viewSubmission(alice, meta, "x")
	otherView["view"].(map[string]any)["callback_id"] = "someone_elses_modal"
	for name, p := range map[string]map[string]any{
		"no trigger for the modal": noTrigger,
		"someone else's modal":     otherView,
		"no actions":               {"type": "block_actions", "user": map[string]any{"id": alice}, "channel": map[string]any{"id": chanOps}, "actions": []any{}},
		"no view":                  {"type": "view_submission", "user": map[string]any{"id": alice}},
	} {
		if _, err := parseInteraction(mustJSON(p)); !errors.Is(err, errBadInteraction) {
			t.Errorf("%s: err %v", name, err)
		}
	}
}

func TestCardRef(t *testing.T) {
	ch, ts, err := ParseCardRef(CardRef("C123ABC", "1700000000.000100"))
	if err != nil || ch != "C123ABC" || ts != "1700000000.000100" {
		t.Fatalf("%q %q %v", ch, ts, err)
	}
	for _, bad := range []string{"", "C123", "C123/", "/1.2", "C123/abc", "c123/1.2", "C1/2/3", "C123/1.2/x"} {
		if _, _, err := ParseCardRef(bad); err == nil {
			t.Errorf("ParseCardRef(%q) accepted", bad)
		}
	}
}

// TestVerifySignature: slack-go's verifier behind our stricter spelling
// checks; the window is five minutes either side of the local clock.
func TestVerifySignature(t *testing.T) {
	now := time.Now()
	at := func(d time.Duration) string { return strconv.FormatInt(now.Add(d).Unix(), 10) }
	body := []byte(`{"type":"event_callback"}`)
	h := func(ts, sig string) http.Header {
		return http.Header{headerTimestamp: {ts}, headerSignature: {sig}}
	}
	sign := func(secret, ts string) string { return fmt.Sprintf("v0=%x", Sign(secret, ts, body)) }
	ts := at(0)
	good := sign(testSecret, ts)
	if err := VerifySignature(testSecret, h(ts, good), body); err != nil {
		t.Fatalf("good signature: %v", err)
	}
	for _, d := range []time.Duration{-4*time.Minute - 50*time.Second, 4*time.Minute + 50*time.Second} {
		if err := VerifySignature(testSecret, h(at(d), sign(testSecret, at(d))), body); err != nil {
			t.Errorf("inside the window (%v): %v", d, err)
		}
	}
	for name, tc := range map[string]struct {
		secret string
		h      http.Header
		want   error
	}{
		"no headers":     {testSecret, http.Header{}, ErrNoSignature},
		"stale":          {testSecret, h(at(-5*time.Minute-10*time.Second), sign(testSecret, at(-5*time.Minute-10*time.Second))), ErrStaleSignature},
		"future":         {testSecret, h(at(6*time.Minute), sign(testSecret, at(6*time.Minute))), ErrStaleSignature},
		"replayed":       {testSecret, h("1700000000", sign(testSecret, "1700000000")), ErrStaleSignature},
		"other secret":   {"other", h(ts, good), ErrBadSignature},
		"v1":             {testSecret, h(ts, "v1="+good[3:]), ErrBadSignature},
		"not hex":        {testSecret, h(ts, "v0=zz"), ErrBadSignature},
		"short":          {testSecret, h(ts, "v0=abcd"), ErrBadSignature},
		"bad timestamp":  {testSecret, h("soon", good), ErrBadSignature},
		"other ts":       {testSecret, h(at(time.Second), good), ErrBadSignature},
		"upper-case hex": {testSecret, h(ts, "v0="+strings.ToUpper(good[3:])), ErrBadSignature},
		"signed ts":      {testSecret, h("+"+ts, sign(testSecret, "+"+ts)), ErrBadSignature},
		"no secret":      {"", h(ts, sign("", ts)), nil},
		"missing header": {testSecret, http.Header{headerSignature: {good}}, ErrNoSignature},
	} {
		err := VerifySignature(tc.secret, tc.h, body)
		if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Errorf("%s: err %v, want %v", name, err, tc.want)
		}
	}
}

func TestGroupCacheExpiresAndSharesFetches(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Unix(1700000000, 0).UnixNano())
	var fetches atomic.Int64
	release := make(chan struct{})
	fail := atomic.Bool{}
	g := newGroupCache(func(ctx context.Context, group string) ([]string, error) {
		fetches.Add(1)
		<-release
		if fail.Load() {
			return nil, errors.New("usergroups.users.list: ratelimited")
		}
		return []string{carol}, nil
	}, func() time.Time { return time.Unix(0, now.Load()) }, time.Minute)

	var wg sync.WaitGroup
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if users, err := g.members(context.Background(), groupOps); err != nil || len(users) != 1 {
				t.Errorf("members: %v %v", users, err)
			}
		}()
	}
	time.Sleep(10 * time.Millisecond) // let them pile up on the one fetch
	close(release)
	wg.Wait()
	if n := fetches.Load(); n != 1 {
		t.Fatalf("%d fetches for concurrent lookups, want 1", n)
	}
	g.members(context.Background(), groupOps)
	now.Add(int64(59 * time.Second))
	g.members(context.Background(), groupOps)
	if n := fetches.Load(); n != 1 {
		t.Fatalf("%d fetches within the ttl, want 1", n)
	}
	now.Add(int64(2 * time.Second))
	g.members(context.Background(), groupOps)
	if n := fetches.Load(); n != 2 {
		t.Fatalf("%d fetches after the ttl, want 2", n)
	}
	// Failures are not kept.
	now.Add(int64(2 * time.Minute))
	fail.Store(true)
	if _, err := g.members(context.Background(), groupOps); err == nil {
		t.Fatal("failure not reported")
	}
	fail.Store(false)
	if users, err := g.members(context.Background(), groupOps); err != nil || len(users) != 1 {
		t.Fatalf("after a failure: %v %v", users, err)
	}
	if n := fetches.Load(); n != 4 {
		t.Fatalf("%d fetches, want 4", n)
	}
}

func TestMentionOnlyThroughMention(t *testing.T) {
	a := &Adapter{mentionNonce: "NONCE1"}
	who := a.Mention(confirm.Approvers{Users: []string{alice, "not an id"}, Groups: []string{groupOps}})
	if strings.Contains(who, "<") {
		t.Fatalf("Mention returned live mentions %q: anyone could paste them", who)
	}
	blocks, text, ok := a.reminder(who + ": a request still needs a decision. <!channel> <@UMALLORY> *b* :skull: \u202e")
	want := "<@UALICE>, <!subteam^SOPS>: a request still needs a decision. &lt;!channel&gt; &lt;@UMALLORY&gt; *b* :skull: \\u202e"
	if !ok || text != want {
		t.Fatalf("got  %q\nwant %q", text, want)
	}
	shown, live := readBlocks(t, mustJSON(blocks))
	if bad := liveProblems(live, shown); len(bad) != 0 || strings.Count(live, "<") != 2 {
		t.Fatalf("reminder live beyond the approvers: %v\n%s", bad, live)
	}
	if !strings.Contains(shown, "<!channel> <@UMALLORY> *b* :skull: \\u202e") {
		t.Fatalf("the quoted read-backs do not show as written: %q", shown)
	}
	// Markers with another nonce (a model guessing) are no reminder, and
	// turn into nothing.
	forged := "\uE000GUESS:UMALLORY\uE001 hi"
	if _, _, ok := a.reminder(forged); ok {
		t.Fatal("a guessed marker made a reminder")
	}
	if got := postText(mentionMarker.ReplaceAllString(forged, "")); got != " hi" {
		t.Fatalf("forged marker became %q", got)
	}
}

func TestNewChecksConfig(t *testing.T) {
	b := &nopBot{}
	st := nopStore{}
	for name, cfg := range map[string]Config{
		"no bot token":       {AppToken: "xapp"},
		"socket w/o app tok": {BotToken: "xoxb", Mode: ModeSocket},
		"http w/o secret":    {BotToken: "xoxb", Mode: ModeHTTP},
		"unknown mode":       {BotToken: "xoxb", Mode: "rtm", AppToken: "x"},
		"bad api url":        {BotToken: "xoxb", AppToken: "xapp", APIURL: "slack.com/api"},
	} {
		if _, err := New(cfg, b, st); err == nil {
			t.Errorf("%s: accepted", name)
		} else if strings.Contains(err.Error(), "xoxb") && name != "no bot token" {
			t.Errorf("%s: the error shows a token: %v", name, err)
		}
	}
	a, err := New(Config{BotToken: "xoxb", AppToken: "xapp", APIURL: "http://127.0.0.1:1/api"}, b, st)
	if err != nil {
		t.Fatal(err)
	}
	if a.cfg.Mode != ModeSocket || a.cfg.APIURL != "http://127.0.0.1:1/api/" {
		t.Errorf("defaults: mode %q api %q", a.cfg.Mode, a.cfg.APIURL)
	}
	if !b.resolverSet {
		t.Error("no group resolver installed")
	}
	if err := a.Run(context.Background()); err == nil {
		t.Error("Run before Start succeeded")
	}
}

type nopBot struct{ resolverSet bool }

func (*nopBot) Admit(context.Context, bot.Turn) bot.Admission { return bot.Admitted }
func (n *nopBot) Interact(ctx context.Context, in bot.Interaction) (bot.Reply, error) {
	return bot.Dispatch(ctx, n, in)
}
func (*nopBot) HandleTurn(context.Context, bot.Turn) error                { return nil }
func (*nopBot) Note(context.Context, bot.Turn) error                      { return nil }
func (*nopBot) HasConversation(context.Context, bot.Thread) (bool, error) { return false, nil }
func (*nopBot) Decide(context.Context, bot.Click) error                   { return nil }
func (*nopBot) Revoke(context.Context, bot.Click) error                   { return nil }
func (*nopBot) MarkChecked(context.Context, bot.Click) error              { return nil }
func (*nopBot) Extend(context.Context, bot.Click) error                   { return nil }
func (*nopBot) Edit(context.Context, bot.Click, string) error             { return nil }
func (*nopBot) EditForm(context.Context, bot.Click) (bot.EditForm, error) {
	return bot.EditForm{}, errors.New("none")
}
func (*nopBot) ClickedCard(context.Context, bot.Click) (*cardpkg.Card, error) {
	return nil, errors.New("none")
}
func (n *nopBot) Channels() *bot.Channels {
	n.resolverSet = true // New installs the resolver on what this returns
	return bot.NewChannels(nil)
}

type nopStore struct{}

func (nopStore) MarkEvent(context.Context, string, string) (bool, error) { return true, nil }

func TestSplitText(t *testing.T) {
	text := strings.Repeat("line of text\n", 1000)
	parts := splitText(text, maxPostChars)
	if strings.Join(parts, "") != text {
		t.Fatal("split lost text")
	}
	for _, p := range parts {
		if utf8.RuneCountInString(p) > maxPostChars {
			t.Fatalf("part of %d characters", utf8.RuneCountInString(p))
		}
		if !strings.HasSuffix(p, "\n") {
			t.Errorf("part not cut at a line break")
		}
	}
}

// --- fuzzing ---

func FuzzEventPayload(f *testing.F) {
	f.Add(mustJSON(mention("Ev1", chanOps, bob, mentionTS, "", "<@UBOT> deploy")))
	f.Add(mustJSON(message("Ev2", dmBob, "im", bob, "1.1", "", "hi")))
	f.Add(mustJSON(message("Ev3", chanOps, "channel", alice, "1.2", "1.1", "aside <@UBOT|x>")))
	f.Add([]byte(`{"type":"url_verification","challenge":"abc"}`))
	f.Add([]byte(`{"type":"event_callback","event_id":"E","event":{"type":"message","subtype":"message_changed"}}`))
	f.Add([]byte(`{"type":"event_callback","event_id":"E","event":null}`))
	f.Add([]byte(`{`))
	f.Add(mustJSON(message("Ev4", "G0GROUP", "mpim", alice, "1.3", "", "<@UBOT> go")))
	f.Add(mustJSON(mention("Ev5", "G0PRIV", alice, "1.3", "1.1", "<@UBOT> go")))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := parseEvent(body)
		if err != nil {
			if !errors.Is(err, errBadEvent) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		act, err := classify(req, self)
		if err != nil {
			if !errors.Is(err, errBadEvent) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		if act.Kind != actIgnore {
			if act.EventID == "" || !channelIDPattern.MatchString(act.Turn.Channel) || act.Turn.User == "" || act.Turn.User == botUser {
				t.Fatalf("turn from a bad event: %+v", act)
			}
			if act.Turn.Thread != "" && !tsPattern.MatchString(act.Turn.Thread) {
				t.Fatalf("bad thread %q", act.Turn.Thread)
			}
			if act.Kind == actNote && act.Turn.Thread == "" {
				t.Fatal("aside outside a thread")
			}
		}
		// One message is at most one turn: a mention's app_mention and its
		// message.* twin are never both turns.
		if act.Kind == actTurn && req.Event.Type == "app_mention" || act.Kind == actTurn && req.Event.ChannelType != "im" {
			for _, ct := range []string{"", "channel", "group", "mpim"} {
				twin := req
				twin.Event.Type, twin.Event.ChannelType = "message", ct
				if req.Event.Type == "message" {
					twin.Event.Type, twin.Event.ChannelType = "app_mention", ""
				}
				if other, err := classify(twin, self); err == nil && other.Kind == actTurn {
					t.Fatalf("%s and its %s twin (%q) are both turns", req.Event.Type, twin.Event.Type, ct)
				}
			}
		}
	})
}

func FuzzInteractionPayload(f *testing.F) {
	f.Add(mustJSON(blockAction(alice, chanOps, mentionTS, ActionAllow, "abc.0")))
	f.Add(mustJSON(blockAction(alice, dmBob, "", ActionDenyReason, "abc.12")))
	f.Add(mustJSON(blockAction(alice, chanOps, mentionTS, ActionShowArgs, "abc.1")))
	f.Add(mustJSON(blockAction(alice, chanOps, mentionTS, ActionAllowGrant, "abc.0")))
	f.Add(mustJSON(blockAction(alice, chanOps, mentionTS, ActionRevokeGrant, "grant-abc")))
	f.Add(mustJSON(blockAction(alice, chanOps, mentionTS, ActionRevokeGrant, "abc.0")))
	f.Add(mustJSON(viewSubmission(alice, ModalMeta{Ref: "abc.0", Channel: chanOps}.encode(), "no")))
	f.Add(mustJSON(blockAction(alice, chanOps, mentionTS, ActionEdit, "abc.0")))
	f.Add(mustJSON(blockAction(alice, dmBob, "", ActionExtend, "abc.0")))
	f.Add(mustJSON(editSubmission(alice, ModalMeta{Ref: "abc.0", Channel: chanOps, Message: chanOps + "/1.2"}.encode(), `{"a":1}`)))
	f.Add([]byte(`{"type":"block_actions","actions":[{}]}`))
	f.Add([]byte(`{"type":"view_submission","view":{"state":{"values":{"a":{"b":{}}}}}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, payload []byte) {
		in, err := parseInteraction(payload)
		if err != nil {
			if !errors.Is(err, errBadInteraction) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		if in.Kind == 0 || !userIDPattern.MatchString(in.User) || !channelIDPattern.MatchString(in.Channel) {
			t.Fatalf("accepted a bad interaction: %+v", in)
		}
		row, ok := in.Kind.Button()
		if !ok || (in.Submit && !row.Submits) {
			t.Fatalf("accepted a button of no kind, or a submission of one that opens no form: %+v", in)
		}
		if err := in.Kind.ParseRef(in.Ref); err != nil {
			t.Fatalf("accepted a bad %s reference %q", row.Ref, in.Ref)
		}
		switch {
		case in.Kind == cardpkg.ActDenyReason && in.Submit:
			if in.Message != "" {
				if ch, _, err := ParseCardRef(in.Message); err != nil || ch != in.Channel {
					t.Fatalf("accepted a bad card message %q", in.Message)
				}
			}
		default:
			if ch, _, err := ParseCardRef(in.Message); err != nil || ch != in.Channel {
				t.Fatalf("accepted a click without its card message: %+v", in)
			}
		}
		if in.Kind == cardpkg.ActEdit && in.Submit && utf8.RuneCountInString(in.Value) > MaxEditChars {
			t.Fatalf("accepted arguments longer than the form holds")
		}
		if row.Opens && !in.Submit && in.TriggerID == "" {
			t.Fatal("modal without a trigger")
		}
	})
}

// FuzzRender: any card and grant notice render within Slack's limits,
// with nothing a model, a tool, a rule or a person wrote live or hidden,
// and only Airlock's buttons with their styles.
func FuzzRender(f *testing.F) {
	f.Add("deploy", "Deploy <api> & co", "{\n  \"a\": \"```\"\n}", "intro & <!channel>", 2)
	f.Add("", "", "", "", 0)
	f.Add(strings.Repeat("t", 100), strings.Repeat("&", 500), strings.Repeat("<\n", 600), strings.Repeat("é", 1300), 30)
	f.Add("x\u202e", "<@UALICE> :skull: *b*", "\x1b[2J\u200b", "<!subteam^SOPS>", 3)
	f.Add("deploy", "UALICE", "{}", "SOPS", 13)
	f.Add("dep\u200cloy", "U\u200dALICE", "", "0", 1) // a name's (non-)joiners, kept in prose, shown in names
	f.Fuzz(func(t *testing.T, tool, summary, args, intro string, n int) {
		card := baseCard()
		card.Intro = intro
		card.GrantFor = time.Duration(n%5) * 30 * time.Minute
		card.Calls = nil
		n = n % 60
		if n < 0 {
			n = -n
		}
		kinds := []cardpkg.Kind{cardpkg.Waiting, cardpkg.AllowedByPolicy, cardpkg.Denied, cardpkg.Allowed, cardpkg.AllowedByGrant,
			cardpkg.Withdrawn, cardpkg.MovedOn, cardpkg.Expired, cardpkg.Invalid, cardpkg.DeniedByRule, cardpkg.NotRun, cardpkg.Kind(summary)}
		for i := 0; i < n; i++ {
			kind := kinds[i%len(kinds)]
			approvals := 1 + i%3
			var votes []confirm.Vote
			for v := 0; v < i%approvals; v++ {
				votes = append(votes, confirm.Vote{By: []string{summary, intro, "UALICE"}[v%3], At: t0})
			}
			card.Calls = append(card.Calls, cardpkg.Call{Ref: confirm.Ref("abc", i), Number: i + 1, Tool: tool, Summary: summary, Args: args,
				Flagged: kind != cardpkg.AllowedByPolicy, Approvals: approvals, Votes: votes, Grantable: i%2 == 0,
				Reasons:  []confirm.Reason{{Kind: confirm.ReasonRule, Rule: intro}, {Kind: confirm.ReasonKind(tool)}},
				Restrict: []confirm.Approvers{{Users: []string{summary, "UALICE"}, Groups: []string{intro}, Roles: []string{tool}}},
				State:    cardpkg.State{Kind: kind, By: summary, At: &t0, Reason: summary, Message: intro, Rule: tool, GrantID: args},
				Run:      confirm.RunFailed, Result: args})
		}
		blocks := RenderWith(card, map[string]string{args: summary})
		if len(blocks) > maxMessageBlock {
			t.Fatalf("%d blocks", len(blocks))
		}
		for _, b := range blocks {
			if s, ok := b.(*slack.SectionBlock); ok && utf8.RuneCountInString(s.Text.Text) > maxSectionText {
				t.Fatalf("section of %d characters", utf8.RuneCountInString(s.Text.Text))
			}
		}
		for _, btn := range buttons(blocks) {
			if _, _, err := confirm.ParseRef(btn.Value); err != nil {
				t.Fatalf("button %s carries %q", btn.ActionID, btn.Value)
			}
			if (btn.Style == slack.StylePrimary) != (btn.ActionID == ActionAllow) || (btn.Style == slack.StyleDanger) != (btn.ActionID == ActionDeny) {
				t.Fatalf("button %s has style %q", btn.ActionID, btn.Style)
			}
		}
		shown, live := readBlocks(t, mustJSON(blocks))
		fallback := FallbackText(card)
		if bad := liveProblems(live+fallback, shown+fallback); len(bad) != 0 {
			t.Fatalf("live or hidden: %v\nlive:\n%s", bad, live)
		}
		if len(card.Calls) > 0 {
			m := ArgsModal(card.Calls[0])
			if len(m.Blocks.BlockSet) > maxModalBlocks {
				t.Fatalf("%d blocks in the modal", len(m.Blocks.BlockSet))
			}
			shown, live := readBlocks(t, mustJSON(m.Blocks))
			if bad := liveProblems(live, shown); len(bad) != 0 {
				t.Fatalf("modal live or hidden: %v", bad)
			}
		}
		notice := cardpkg.GrantNotice{Ref: confirm.GrantRef("abc"), GrantID: args, Tool: tool, By: summary, Until: t0.Add(time.Duration(n) * time.Minute)}
		if n%2 == 1 {
			notice.RevokedBy, notice.RevokedAt = intro, &t0
		}
		nb := RenderGrantNotice(notice, t0)
		shown, live = readBlocks(t, mustJSON(nb))
		text := GrantNoticeText(notice)
		if bad := liveProblems(live+text, shown+text); len(bad) != 0 || strings.ContainsAny(text, "<>") {
			t.Fatalf("notice live or hidden: %v\nlive:\n%s\ntext: %q", bad, live, text)
		}
		if bs := buttons(nb); len(bs) != map[bool]int{true: 1, false: 0}[notice.Active(t0)] {
			t.Fatalf("%d buttons on a notice (active %v)", len(bs), notice.Active(t0))
		}
	})
}

// FuzzVerifySignature: no header or body makes VerifySignature panic, and
// only the body signed with the secret, under a timestamp less than five
// minutes from now, verifies. A timestamp starting with "now" is now minus
// skew seconds followed by the rest, so the fuzzer reaches the window and
// its edges whatever the date.
func FuzzVerifySignature(f *testing.F) {
	body := []byte(`{"type":"event_callback"}`)
	now := strconv.FormatInt(time.Now().Unix(), 10)
	f.Add(body, "now", fmt.Sprintf("v0=%x", Sign(testSecret, now, body)), int64(0))
	f.Add(body, "now", "v0=", int64(299))
	f.Add(body, "now", "v0=", int64(301))
	f.Add(body, "now", "v0=", int64(-301))
	f.Add(body, "now ", "v0=", int64(1))
	f.Add(body, "1700000000", fmt.Sprintf("v0=%x", Sign(testSecret, "1700000000", body)), int64(0))
	f.Add(body, "+1700000000", fmt.Sprintf("v0=%x", Sign(testSecret, "+1700000000", body)), int64(0))
	f.Add(body, "1700000000 ", "v0=", int64(-400))
	f.Add([]byte{}, "", "", int64(0))
	f.Add([]byte("payload=x"), "99999999999999999999", "v0=zz", int64(1))
	f.Fuzz(func(t *testing.T, body []byte, ts, sig string, skew int64) {
		if rest, ok := strings.CutPrefix(ts, "now"); ok {
			ts = strconv.FormatInt(time.Now().Unix()-skew%1000, 10) + rest
		}
		h := http.Header{}
		h.Set(headerTimestamp, ts)
		h.Set(headerSignature, sig)
		// fresh reports whether the header's timestamp is a well-formed
		// time within the window of at.
		fresh := func(at time.Time) bool {
			ts := h.Get(headerTimestamp)
			sec, err := strconv.ParseInt(ts, 10, 64)
			if err != nil || !digits(ts, 12) {
				return false
			}
			d := at.Sub(time.Unix(sec, 0))
			return d <= MaxSignatureAge && d >= -MaxSignatureAge
		}
		before := time.Now()
		err := VerifySignature(testSecret, h, body)
		after := time.Now()
		if err == nil {
			// Accepted: then the signature is the secret's over this exact
			// timestamp and body, and the timestamp is fresh.
			if !fresh(before) && !fresh(after) {
				t.Fatalf("accepted a malformed or stale timestamp %q", h.Get(headerTimestamp))
			}
			if want := "v0=" + hex.EncodeToString(Sign(testSecret, h.Get(headerTimestamp), body)); h.Get(headerSignature) != want {
				t.Fatalf("accepted signature %q, want %q", sig, want)
			}
			if VerifySignature("another secret", h, body) == nil {
				t.Fatal("another secret verified the same request")
			}
			if len(body) > 0 {
				flipped := append([]byte(nil), body...)
				flipped[0] ^= 1
				if VerifySignature(testSecret, h, flipped) == nil {
					t.Fatal("a changed body verified")
				}
			}
		}
		// The right signature for this body and timestamp verifies exactly
		// when the timestamp is a fresh integer (a call at the very edge of
		// the window, fresh before it and stale after, may go either way).
		h.Set(headerSignature, "v0="+hex.EncodeToString(Sign(testSecret, h.Get(headerTimestamp), body)))
		before = time.Now()
		got := VerifySignature(testSecret, h, body) == nil
		after = time.Now()
		if fb, fa := fresh(before), fresh(after); fb == fa && got != fb {
			t.Fatalf("correctly signed, timestamp %q (fresh %v): verified %v", h.Get(headerTimestamp), fb, got)
		}
	})
}

func (*nopBot) RunAction(context.Context, bot.Click, cardpkg.ActionKind) error { return nil }
func (*nopBot) DecideAll(context.Context, bot.Click) (bot.AllResult, error) {
	return bot.AllResult{}, nil
}

func (*nopBot) PhraseFor(context.Context, bot.Click) (bot.PhrasePrompt, bool, error) {
	return bot.PhrasePrompt{}, false, nil
}

func (*nopBot) QuestionForm(context.Context, bot.Click) (cardpkg.QuestionNotice, error) {
	return cardpkg.QuestionNotice{}, nil
}
func (*nopBot) AnswerQuestion(context.Context, bot.Click, []string) error { return nil }
func (*nopBot) DeclineQuestion(context.Context, bot.Click) error          { return nil }
