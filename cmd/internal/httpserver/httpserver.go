// Package httpserver is how airlock run serves HTTP: the server's limits
// and the handler around the platforms' routes with the health and
// readiness endpoints. The lab's bench serves the bench's Airlock with it
// too, so that what it measures is what airlock run serves.
package httpserver

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// Limits bound what one client can hold: a slow or endless client
// cannot keep a connection or grow memory (Slack posts small JSON bodies,
// probes are tiny).
type Limits struct {
	ReadHeader, Read, Write, Idle time.Duration
	MaxHeaderBytes                int
}

// DefaultLimits are airlock run's.
var DefaultLimits = Limits{
	ReadHeader:     10 * time.Second,
	Read:           30 * time.Second,
	Write:          30 * time.Second,
	Idle:           120 * time.Second,
	MaxHeaderBytes: 64 << 10,
}

// New is a server of h within l.
func New(h http.Handler, l Limits) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: l.ReadHeader,
		ReadTimeout:       l.Read,
		WriteTimeout:      l.Write,
		IdleTimeout:       l.Idle,
		MaxHeaderBytes:    l.MaxHeaderBytes,
	}
}

// Pinger is what readiness needs from storage.
type Pinger interface {
	Ping(ctx context.Context) error
}

// Handler serves routes, GET /healthz (the process answers) and GET
// /readyz (the database answers too).
func Handler(db Pinger, routes map[string]http.Handler) http.Handler {
	mux := http.NewServeMux()
	for pattern, h := range routes {
		mux.Handle(pattern, h)
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := db.Ping(ctx); err != nil {
			http.Error(w, "database unavailable", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	return mux
}
