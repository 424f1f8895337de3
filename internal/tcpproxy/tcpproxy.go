// Package tcpproxy is a TCP proxy on 127.0.0.1 for tests and the chaos
// soak, which take a server away and bring it back: Cut closes every
// connection and refuses new ones (as a server restarting or a network
// partition looks to a client), Restore forwards again.
package tcpproxy

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy forwards connections on Addr to a target address.
type Proxy struct {
	Addr   string // host:port to connect to instead of the target
	target string
	ln     net.Listener

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
}

// New starts a proxy to target, closed when the test ends.
func New(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := Start(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// Start starts a proxy to target on a free port of 127.0.0.1.
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{Addr: ln.Addr().String(), target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	go p.accept()
	return p, nil
}

// Close stops the proxy and closes its connections.
func (p *Proxy) Close() {
	p.ln.Close()
	p.Cut()
}

// Cut closes every open connection and refuses new ones until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// Restore forwards new connections again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.forward(c)
	}
}

func (p *Proxy) forward(c net.Conn) {
	if !p.track(c) {
		c.Close()
		return
	}
	up, err := net.Dial("tcp", p.target)
	if err != nil || !p.track(up) {
		c.Close()
		if up != nil {
			up.Close()
		}
		return
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		dst.Close()
		src.Close()
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
	<-done
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

// track records c unless the proxy is cut.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}
