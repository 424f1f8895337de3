package main

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/airlockhq/airlock/config"
	"github.com/airlockhq/airlock/model"
)

// Many turns asking the model at once, round after round, reuse the
// connections of the first round: each new one would cost a TCP and TLS
// handshake at the provider.
func TestModelClientKeepsConnectionsOfConcurrentTurns(t *testing.T) {
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"c1","object":"chat.completion","created":1,"model":"m",
			"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"ok"}}]}`))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	p, err := newProvider(t.Context(), config.Model{Provider: "openai", Name: "m", APIKey: "k", BaseURL: srv.URL + "/v1"})
	if err != nil {
		t.Fatal(err)
	}
	const turns, rounds = 24, 4
	for range rounds {
		var wg sync.WaitGroup
		errs := make(chan error, turns)
		for range turns {
			wg.Go(func() {
				_, err := p.Generate(context.Background(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}})
				if err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	if n := conns.Load(); n > turns+turns/4 {
		t.Fatalf("%d rounds of %d concurrent model requests opened %d connections, want about %d", rounds, turns, n, turns)
	}
}
