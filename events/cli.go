package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/events/webhook"
	"github.com/airlockhq/airlock/storage"
)

// listMax bounds the rows List prints.
const listMax = 1000

// List prints the undelivered deliveries (`airlock events`), or with dead
// the dead ones (`airlock events -dead`), oldest first: id, event, type,
// conversation, webhook (named from hooks when its URL is configured),
// attempts, state and the last error. A pending delivery's state is "due",
// "retry at <time>", "sending" (claimed by a replica) or "waiting" (behind
// an earlier undelivered event of its conversation for that webhook).
func List(ctx context.Context, db *storage.DB, w io.Writer, hooks []Webhook, dead bool) error {
	ds, err := db.Deliveries(ctx, storage.DeliveryFilter{Status: []storage.DeliveryStatus{storage.DeliveryPending, storage.DeliveryDead}})
	if err != nil {
		return err
	}
	names := map[string]string{}
	for _, h := range hooks {
		names[h.ID()] = h.Name()
	}
	now := db.Clock()()
	type queue struct {
		target string
		conv   int64
	}
	head := map[queue]int64{} // the oldest undelivered delivery of each queue
	for _, d := range ds {
		q := queue{d.Target, d.ConversationID}
		if _, ok := head[q]; !ok {
			head[q] = d.ID
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if dead {
		fmt.Fprintln(tw, "ID\tEVENT\tTYPE\tCONVERSATION\tWEBHOOK\tATTEMPTS\tDEAD SINCE\tLAST ERROR")
	} else {
		fmt.Fprintln(tw, "ID\tEVENT\tTYPE\tCONVERSATION\tWEBHOOK\tATTEMPTS\tSTATE\tLAST ERROR")
	}
	shown, more := 0, 0
	for _, d := range ds {
		if (d.Status == storage.DeliveryDead) != dead {
			continue
		}
		if shown == listMax {
			more++
			continue
		}
		shown++
		name := names[d.Target]
		if name == "" {
			name = d.Target + " (not configured)"
		}
		var state string
		switch {
		case dead:
			state = stamp(d.DeadAt)
		case head[queue{d.Target, d.ConversationID}] != d.ID:
			state = "waiting"
		case d.ClaimedBy != "" && d.ClaimExpiresAt != nil && d.ClaimExpiresAt.After(now):
			state = "sending"
		case d.NextAttemptAt.After(now):
			state = "retry at " + d.NextAttemptAt.UTC().Format(time.RFC3339)
		default:
			state = "due"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", d.ID, d.EventID, d.Type, conversation(d), name, d.Attempts, state, cell(d.LastError))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if more > 0 {
		fmt.Fprintf(w, "… and %d more\n", more)
	}
	if shown == 0 {
		if dead {
			fmt.Fprintln(w, "no dead deliveries")
		} else {
			fmt.Fprintln(w, "nothing waiting to be delivered")
		}
	}
	return nil
}

// conversation names a delivery's conversation from its event.
func conversation(d storage.Delivery) string {
	var ev webhook.Event
	if json.Unmarshal(d.Body, &ev) != nil || ev.Conversation.Platform == "" {
		return strconv.FormatInt(d.ConversationID, 10)
	}
	s := fmt.Sprintf("%d %s/%s", d.ConversationID, ev.Conversation.Platform, ev.Conversation.Channel)
	if ev.Conversation.Thread != "" {
		s += "/" + ev.Conversation.Thread
	}
	return s
}

func stamp(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// cell is s on one line for the table, "-" when that is empty.
func cell(s string) string {
	if s = card.OneLine(s); s == "" {
		return "-"
	}
	return s
}

// Retry makes the dead delivery id pending again with its attempts reset
// (`airlock events retry ID`); the deliverer sends it within a poll, and
// the events of its conversation that waited behind it follow.
func Retry(ctx context.Context, db *storage.DB, id string) error {
	n, err := strconv.ParseInt(strings.TrimSpace(id), 10, 64)
	if err != nil || n <= 0 {
		return fmt.Errorf("delivery id %q is not a number (see airlock events -dead)", id)
	}
	ok, err := db.RetryDelivery(ctx, n, time.Time{})
	if err != nil {
		return err
	}
	if ok {
		return nil
	}
	d, err := db.Delivery(ctx, n)
	if errors.Is(err, confirm.ErrNotFound) {
		return fmt.Errorf("no delivery %d", n)
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("delivery %d is %s, not dead", n, d.Status)
}
