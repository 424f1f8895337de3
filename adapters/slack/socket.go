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
// outcome (see submitEdit).
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
			a.socketRequest(ctx, smc, *evt.Request, received)
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
		a.socketRequest(ctx, smc, req, received)
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

// socketRequest acks one envelope, then validates and works it.
func (a *Adapter) socketRequest(ctx context.Context, smc *socketmode.Client, req socketmode.Request, received time.Time) {
	if req.EnvelopeID == "" {
		return
	}
	// Held from before the ack until the work is spawned, so Wait after
	// an ack always covers that envelope's work.
	a.wg.Add(1)
	defer a.wg.Done()
	var in interaction
	var inErr error
	if req.Type == socketmode.RequestTypeInteractive {
		// Parsed once, here: the edit modal's submission is acked with the
		// edit's outcome (see submitEdit), off the loop that reads the
		// connection.
		if in, inErr = parseInteraction(req.Payload); inErr == nil && in.Kind.answered() {
			a.wg.Add(1)
			go func() {
				defer a.wg.Done()
				a.socketEdit(ctx, smc, req.EnvelopeID, in, received)
			}()
			return
		}
	}
	if err := smc.AckCtx(ctx, req.EnvelopeID, nil); err != nil {
		if !errors.Is(err, context.Canceled) {
			a.log.Error("slack: ack envelope", "envelope", req.EnvelopeID, "err", err)
		}
	} else {
		a.acked(received)
	}
	log := a.log.With("envelope", req.EnvelopeID)
	switch req.Type {
	case socketmode.RequestTypeEventsAPI:
		ev, err := parseEvent(req.Payload)
		if err == nil && ev.Type == envelopeEventCallback && !a.ourTeam(ev.TeamID, "event") {
			return
		}
		if err == nil {
			var act eventAction
			if act, err = classify(ev, a.identity()); err == nil {
				if req.RetryAttempt > 0 {
					log.Info("slack: retried delivery", "event", ev.EventID, "retry", req.RetryAttempt, "reason", req.RetryReason)
				}
				if act.Kind != actIgnore {
					a.spawn("event "+ev.EventID, func(ctx context.Context) { a.handleEvent(ctx, act, req.RetryAttempt) })
				}
				return
			}
		}
		log.Warn("slack: event ignored", "err", err)
	case socketmode.RequestTypeInteractive:
		if inErr != nil {
			log.Warn("slack: interaction ignored", "err", inErr)
			return
		}
		if !a.ourTeam(in.Team, "interaction") {
			return
		}
		a.spawn("interaction", func(ctx context.Context) { a.handleInteraction(ctx, in) })
	default:
		log.Debug("slack: envelope ignored", "type", req.Type)
	}
}

// socketEdit acks the edit modal's submission with the edit's outcome: a
// refused edit's response_action "errors" payload keeps the modal open;
// an ack without payload closes it.
func (a *Adapter) socketEdit(ctx context.Context, smc *socketmode.Client, envelope string, in interaction, received time.Time) {
	var payload any
	var ans editAnswer
	if a.ourTeam(in.Team, "interaction") {
		ans = a.submitAnswered(a.context(), in)
		if p := ans.payload(); p != nil {
			payload = p
		}
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
