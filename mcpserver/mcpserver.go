// Package mcpserver is Airlock as an MCP server (issue 37): the gateway's
// clients connect to `gateway.mcp.path` over streamable HTTP with their
// bearer tokens and are offered the Airlock tools their `tools` globs name.
// A call runs in Airlock as the built-in agent's would; one that needs a
// yes waits inside tools/call, for up to `gateway.mcp.hold`, while its card
// waits in the client's channel. This package owns the MCP side: who is
// asking (the token), the per-client server, the hold and its progress
// notifications, and the words a client reads; the approval core behind
// gateway.Tools owns the rest.
package mcpserver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockhq/airlock/gateway"
)

// Intervals of a held call.
const (
	pollEvery = 250 * time.Millisecond
	// DefaultProgressEvery is how often a held call tells a client that
	// sent a progressToken that it still waits.
	DefaultProgressEvery = 10 * time.Second
)

// Metrics is what the server records.
type Metrics interface {
	// GatewayUnauthorized counts a request refused for its token.
	GatewayUnauthorized()
}

// Server serves MCP to the gateway's clients.
type Server struct {
	Config  gateway.Config
	Tools   gateway.Tools
	Metrics Metrics
	Logger  *slog.Logger
	// Version is Airlock's, told to clients at initialization.
	Version string
	// ProgressEvery is the interval of a held call's progress
	// notifications; default DefaultProgressEvery.
	ProgressEvery time.Duration

	rates gateway.Limiter
}

// Handler is the MCP endpoint: every request authenticated by a client's
// bearer token (401 with WWW-Authenticate, counted, otherwise), a session
// bound to the client that opened it.
func (s *Server) Handler() http.Handler {
	log := s.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mcpHandler := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		c, ok := s.client(r)
		if !ok {
			return nil
		}
		return s.serverFor(c)
	}, &mcp.StreamableHTTPOptions{Logger: log})
	// The SDK's bearer check puts the client's name in the request's
	// token info, which binds an MCP session to the client that opened
	// it: another client's token is refused on it.
	verified := auth.RequireBearerToken(func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		c, ok := s.Config.ByToken(token)
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: c.Name, Expiration: time.Now().Add(24 * time.Hour)}, nil
	}, nil)(mcpHandler)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := s.client(r); !ok {
			if s.Metrics != nil {
				s.Metrics.GatewayUnauthorized()
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="airlock", error="invalid_token"`)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":"unauthorized"}` + "\n"))
			return
		}
		verified.ServeHTTP(w, r)
	})
}

// client is the request's client, by its bearer token.
func (s *Server) client(r *http.Request) (gateway.Client, bool) {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return gateway.Client{}, false
	}
	return s.Config.ByToken(strings.TrimSpace(token))
}

// serverFor is the MCP server a client's session talks to: the tools it
// is offered, each calling into the core as that client.
func (s *Server) serverFor(c gateway.Client) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "airlock", Version: s.Version}, &mcp.ServerOptions{
		Instructions: "Airlock's tools. A call that needs a person's yes waits for it in chat; when it is still waiting, " +
			"call the same tool with the same arguments again to get the outcome.",
	})
	for _, t := range s.Tools.Offered(c) {
		srv.AddTool(&mcp.Tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema}, s.handler(c, t.Name))
	}
	return srv
}

// handler is one tool's tools/call for client c: the call is made (or a
// retry joins it) and, while a person has not decided, held for up to the
// hold, with progress notifications when the client asked for them.
func (s *Server) handler(c gateway.Client, tool string) mcp.ToolHandler {
	log := s.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if !s.rates.Allow(c, time.Now()) {
			return errorResult(fmt.Sprintf("Refused: over %d calls a minute (gateway.clients[].requests_per_minute). Nothing ran; call again in a minute.", c.RequestsPerMinute)), nil
		}
		session := req.Session.ID()
		out, err := s.Tools.Call(ctx, c, session, tool, req.Params.Arguments)
		switch {
		case errors.Is(err, gateway.ErrUnknownTool):
			return nil, fmt.Errorf("unknown tool %q", tool)
		case errors.Is(err, gateway.ErrTooManyPending):
			return errorResult(fmt.Sprintf("Refused: %d calls of this client wait for approval already (gateway.clients[].max_pending). Nothing ran; call again once they are decided.", c.MaxPending)), nil
		case err != nil:
			return errorResult("Airlock could not record the call; nothing ran. Try again."), nil
		}
		deadline := time.Now().Add(s.Config.MCP.Hold)
		token := req.Params.GetProgressToken()
		lastProgress, progress := time.Now(), 0.0
		for out.State == gateway.CallWaiting && time.Now().Before(deadline) {
			select {
			case <-ctx.Done():
				// The client stopped waiting: the card waits on, says
				// so, and a retry joins it.
				if err := s.Tools.Left(context.WithoutCancel(ctx), c, out.ID); err != nil {
					log.Warn("mcp: record that a client stopped waiting", "client", c.Name, "request", out.ID, "err", err)
				}
				return nil, ctx.Err()
			case <-time.After(min(pollEvery, time.Until(deadline))):
			}
			if token != nil && time.Since(lastProgress) >= cmp.Or(s.ProgressEvery, DefaultProgressEvery) {
				progress++
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: progress,
					Message: "Waiting for a person's decision in Airlock (request " + out.ID + ")."})
				lastProgress = time.Now()
			}
			next, err := s.Tools.Outcome(ctx, c, out.ID)
			if err != nil {
				break
			}
			out = next
		}
		switch out.State {
		case gateway.CallDone, gateway.CallRefused:
			res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: out.Result}}, IsError: out.IsError}
			return res, nil
		}
		where := out.CardURL
		if where == "" {
			where = "Airlock"
		}
		return errorResult(fmt.Sprintf("Waiting for approval in %s (request %s). Nothing ran. Call this tool again with the same arguments to get the outcome.", where, out.ID)), nil
	}
}

func errorResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, IsError: true}
}
