package bench

import (
	"context"
	"testing"

	slackgo "github.com/slack-go/slack"

	"github.com/airlockhq/airlock/adapters/slack"
)

// The fake Slack counts a card's decision finished once, by the model's
// answer in the card's thread: a second answer there, or any post outside
// a card's thread, is unexpected and never finishes a decision, so that
// the bench's exactly-once figure cannot be met by extra posts.
func TestFakeSlackCountsEachDecisionOnce(t *testing.T) {
	fake := newFakeSlack(2)
	srv, u, err := serve(testHTTP, fake)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	api := slackgo.New("xoxb-bench", slackgo.OptionAPIURL(u+"/api/"))
	ctx := context.Background()
	postIn := func(thread string, opts ...slackgo.MsgOption) {
		t.Helper()
		if _, _, err := api.PostMessageContext(ctx, channelID(0), append(opts, slackgo.MsgOptionTS(thread))...); err != nil {
			t.Fatal(err)
		}
	}
	allow := slackgo.NewButtonBlockElement(slack.ActionAllow, "ref-0", slackgo.NewTextBlockObject(slackgo.PlainTextType, "Allow", false, false))
	posted := fake.await(0)
	postIn(threadTS(0), slackgo.MsgOptionBlocks(slackgo.NewActionBlock("calls", allow)))
	select {
	case <-posted:
	default:
		t.Fatal("the card was not taken as posted")
	}
	if fake.ref(0) != "ref-0" || fake.cardTS(0) == "" {
		t.Errorf("card 0: ref %q, ts %q", fake.ref(0), fake.cardTS(0))
	}
	postIn(threadTS(0), slackgo.MsgOptionText(modelAnswer, false))
	postIn(threadTS(0), slackgo.MsgOptionText(modelAnswer, false))         // again
	postIn("1700000000.000007", slackgo.MsgOptionText(modelAnswer, false)) // no card's thread
	postIn(threadTS(1), slackgo.MsgOptionText("something else", false))    // not the answer
	if got := fake.doneCount.Load(); got != 1 {
		t.Errorf("%d decisions finished, want 1", got)
	}
	if got := fake.unexpected.Load(); got != 3 {
		t.Errorf("%d unexpected posts, want 3", got)
	}
	select {
	case <-fake.allDone:
		t.Error("every decision counted finished with one of two cards answered")
	default:
	}
}
