package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gorilla/websocket"
	"github.com/slack-go/slack/socketmode"
)

// runSocket holds the Socket Mode connection until ctx ends. Every
// envelope is acknowledged at once, then worked on in the background; a
// retried envelope (retry_attempt > 0) is de-duplicated by its event id.
// The edit modal's submission alone is acknowledged with the edit's
// outcome (see submitAnswered).
func (a *Adapter) runSocket(ctx context.Context) error {
	smc := socketmode.New(a.api, socketmode.OptionDialer(a.dialer()))
	errc := make(chan error, 1)
	go func() { errc <- smc.RunContext(ctx) }()
	for {
		select {
		case <-ctx.Done():
			<-errc
			return nil
		case err := <-errc:
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("slack: socket mode (check slack.app_token): %w", err)
		case evt := <-smc.Events:
			a.socketEvent(ctx, smc, evt, time.Now())
		}
	}
}

// dialer opens the websocket through the same proxy and TLS settings as
// the Web API client.
func (a *Adapter) dialer() *websocket.Dialer {
	d := &websocket.Dialer{HandshakeTimeout: 45 * time.Second, WriteBufferSize: 32 * 1024}
	if t, ok := a.cfg.HTTPClient.Transport.(*http.Transport); ok {
		d.Proxy = t.Proxy
		d.TLSClientConfig = t.TLSClientConfig
	} else if a.cfg.HTTPClient.Transport == nil {
		d.Proxy = http.ProxyFromEnvironment // as http.DefaultTransport does
	}
	return d
}

func (a *Adapter) socketEvent(ctx context.Context, smc *socketmode.Client, evt socketmode.Event, received time.Time) {
	switch evt.Type {
	case socketmode.EventTypeEventsAPI, socketmode.EventTypeInteractive, socketmode.EventTypeSlashCommand:
		if evt.Request != nil {
			a.socketRequestAside(ctx, smc, *evt.Request, received)
		}
	case socketmode.EventTypeErrorBadMessage:
		// The library could not parse the envelope's payload its way; ack
		// it and judge the payload with our own parser.
		bad, _ := evt.Data.(*socketmode.ErrorBadMessage)
		if bad == nil {
			return
		}
		var req socketmode.Request
		if err := json.Unmarshal(bad.Message, &req); err != nil || req.EnvelopeID == "" {
			a.log.Warn("slack: unreadable socket mode message ignored", "err", bad.Cause)
			return
		}
		a.socketRequestAside(ctx, smc, req, received)
	case socketmode.EventTypeConnected:
		a.log.Info("slack: socket mode connected")
	case socketmode.EventTypeConnecting:
		a.log.Debug("slack: socket mode connecting")
	case socketmode.EventTypeConnectionError:
		a.log.Warn("slack: socket mode connection failed; retrying", "err", connErr(evt.Data))
	case socketmode.EventTypeInvalidAuth:
		a.log.Error("slack: socket mode refused the app token (slack.app_token)")
	case socketmode.EventTypeIncomingError, socketmode.EventTypeErrorWriteFailed:
		a.log.Warn("slack: socket mode error", "type", evt.Type, "err", connErr(evt.Data))
	case socketmode.EventTypeDisconnect:
		a.log.Info("slack: socket mode reconnecting as Slack asked")
	}
}

func connErr(data any) any {
	if e, ok := data.(error); ok {
		return e
	}
	if s, ok := data.(fmt.Stringer); ok {
		return s.String()
	}
	return fmt.Sprintf("%T", data)
}

// socketRequestAside runs socketRequest off the loop that reads the
// connection: recording an envelope waits on the database.
func (a *Adapter) socketRequestAside(ctx context.Context, smc *socketmode.Client, req socketmode.Request, received time.Time) {
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		a.socketRequest(ctx, smc, req, received)
	}()
}

// socketRequest validates one envelope, records it in the inbox when it
// asks for work, acks it, then works it. An envelope that could not be
// recorded is not acked: Slack sends an event again (on its last try it is
// acked and its thread told nothing was done) and shows a click failed
// (its clicker is also told why).
func (a *Adapter) socketRequest(ctx context.Context, smc *socketmode.Client, req socketmode.Request, received time.Time) {
	if req.EnvelopeID == "" {
		return
	}
	// Held from before the ack until the work is spawned, so Wait after
	// an ack always covers that envelope's work.
	a.wg.Add(1)
	defer a.wg.Done()
	ack := func() {
		if err := smc.AckCtx(ctx, req.EnvelopeID, nil); err != nil {
			if !errors.Is(err, context.Canceled) {
				a.log.Error("slack: ack envelope", "envelope", req.EnvelopeID, "err", err)
			}
		} else {
			a.acked(received)
		}
	}
	log := a.log.With("envelope", req.EnvelopeID)
	switch req.Type {
	case socketmode.RequestTypeEventsAPI:
		ev, err := parseEvent(req.Payload)
		var act eventAction
		if err == nil {
			if ev.Type == envelopeEventCallback && !a.ourTeam(ev.TeamID, "event") {
				ack()
				return
			}
			act, err = classify(ev, a.identity())
		}
		if err != nil {
			ack()
			log.Warn("slack: event ignored", "err", err)
			return
		}
		if req.RetryAttempt > 0 {
			log.Info("slack: retried delivery", "event", ev.EventID, "retry", req.RetryAttempt, "reason", req.RetryReason)
		}
		if act.Kind == actIgnore {
			ack()
			return
		}
		d, first, err := a.recordEvent(act, ev.EventID, req.Payload)
		if err != nil {
			log.Warn("slack: event not recorded", "event", ev.EventID, "retry", req.RetryAttempt, "err", err)
			if req.RetryAttempt < lastRetry {
				return // not acked: Slack sends it again
			}
			ack()
			a.spawn("event "+ev.EventID+" not recorded", func(ctx context.Context) { a.notRecorded(ctx, act) })
			return
		}
		ack()
		if !first {
			log.Info("slack: retried event recorded already; ignored", "event", ev.EventID)
			return
		}
		if d != nil {
			act.Turn.Inbox = d.Key
		}
		a.trace("slack-acked-event")
		a.spawn("event "+ev.EventID, func(ctx context.Context) {
			defer a.finish(d)
			a.handleEvent(ctx, act, req.RetryAttempt)
		})
	case socketmode.RequestTypeInteractive:
		in, err := parseInteraction(req.Payload)
		if err != nil {
			ack()
			log.Warn("slack: interaction ignored", "err", err)
			return
		}
		if !a.ourTeam(in.Team, "interaction") {
			ack()
			return
		}
		d, _, err := a.record(deliveryInteraction, interactionKey(), req.Payload)
		if err != nil {
			log.Warn("slack: interaction not recorded", "user", in.User, "err", err)
			a.spawn("interaction not recorded", func(ctx context.Context) {
				a.ephemeral(ctx, in.Channel, in.Thread, in.User, notRecordedClick)
			})
			return // not acked: Slack shows the click failed
		}
		in.delivery = d
		if in.answered() {
			// The edit modal's submission is acked with the edit's
			// outcome (see submitAnswered), off the loop that reads the
			// connection.
			a.wg.Add(1)
			go func() {
				defer a.wg.Done()
				a.socketEdit(ctx, smc, req.EnvelopeID, in, received)
			}()
			return
		}
		ack()
		a.trace("slack-acked-interaction")
		a.spawn("interaction", func(ctx context.Context) {
			defer a.finish(d)
			a.interact(ctx, in)
		})
	default:
		ack()
		log.Debug("slack: envelope ignored", "type", req.Type)
	}
}

// socketEdit acks the edit modal's submission with the edit's outcome: a
// refused edit's response_action "errors" payload keeps the modal open;
// an ack without payload closes it.
func (a *Adapter) socketEdit(ctx context.Context, smc *socketmode.Client, envelope string, in interaction, received time.Time) {
	var payload any
	ans := a.submitAnswered(a.context(), in) // the team was checked
	if p := ans.payload(); p != nil {
		payload = p
	}
	if err := smc.AckCtx(ctx, envelope, payload); err != nil {
		if !errors.Is(err, context.Canceled) {
			a.log.Error("slack: ack envelope", "envelope", envelope, "err", err)
		}
	} else {
		a.acked(received)
	}
	if ans.notify != "" {
		a.spawn("edit answer", func(ctx context.Context) { a.ephemeral(ctx, in.Channel, in.Thread, in.User, ans.notify) })
	}
}
