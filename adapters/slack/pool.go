package slack

import (
	"context"
	"sync"
)

// maxIdleQueue is the most queue slots kept while nothing waits.
const maxIdleQueue = 4096

// job is one acknowledged delivery's work.
type job struct {
	what string
	fn   func(ctx context.Context)
}

// pool is a FIFO queue of jobs worked on by at most max goroutines. A
// burst of deliveries costs a slot in the queue each, not a goroutine
// (and its stack) each, and the goroutines that work exist only while
// there is work.
type pool struct {
	max int

	mu      sync.Mutex
	queue   []job
	head    int // queue[head:] waits
	running int
}

// push queues j; true when the caller must start a worker for it.
func (p *pool) push(j job) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.queue = append(p.queue, j)
	if p.running < p.max {
		p.running++
		return true
	}
	return false
}

// pop takes the oldest job; false (and one worker fewer) when none waits.
func (p *pool) pop() (job, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.head == len(p.queue) {
		p.queue, p.head = p.queue[:0], 0
		if cap(p.queue) > maxIdleQueue {
			p.queue = nil // a burst's queue is not kept
		}
		p.running--
		return job{}, false
	}
	j := p.queue[p.head]
	p.queue[p.head] = job{} // let the closure go
	p.head++
	if p.head >= 1024 && 2*p.head >= len(p.queue) {
		n := copy(p.queue, p.queue[p.head:])
		clear(p.queue[n:])
		p.queue, p.head = p.queue[:n], 0
	}
	return j, true
}
