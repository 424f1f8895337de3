package gateway

import (
	"sync"
	"time"
)

// Limiter counts each client's requests a minute
// (gateway.clients[].requests_per_minute), for the approval API and MCP
// alike. The zero Limiter is ready.
type Limiter struct {
	mu    sync.Mutex
	rates map[string]*window // requests this minute, by client
}

type window struct {
	start time.Time
	n     int
}

// Allow counts a request of c at now: false past its requests a minute.
func (l *Limiter) Allow(c Client, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rates == nil {
		l.rates = map[string]*window{}
	}
	wd := l.rates[c.Name]
	if wd == nil || now.Sub(wd.start) >= time.Minute {
		wd = &window{start: now}
		l.rates[c.Name] = wd
	}
	if wd.n >= c.RequestsPerMinute {
		return false
	}
	wd.n++
	return true
}
