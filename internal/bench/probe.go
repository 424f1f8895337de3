package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// probe sends body to the bare handler at u, rate times a second, each
// request on time however long the earlier ones take (at most 64 at once,
// on connections of their own), until the function it returns is called;
// that returns the latencies of the requests answered with 200.
func probe(ctx context.Context, u string, body []byte, rate int) func() []time.Duration {
	p := &prober{
		client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}},
		slots:  make(chan struct{}, 64),
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(time.Second / time.Duration(rate))
		defer t.Stop()
		for {
			p.send(ctx, u, body) // the first at once: a short run has one at least
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() []time.Duration {
		close(stop)
		<-done
		return p.wait()
	}
}

// prober is probe's sender: its requests in flight and the latencies of
// those answered.
type prober struct {
	client *http.Client
	slots  chan struct{} // one per request in flight
	sent   sync.WaitGroup
	mu     sync.Mutex
	lat    []time.Duration
}

// send starts one request, unless 64 are outstanding: then it is skipped.
func (p *prober) send(ctx context.Context, u string, body []byte) {
	select {
	case p.slots <- struct{}{}:
	default:
		return
	}
	p.sent.Go(func() {
		defer func() { <-p.slots }()
		t0 := time.Now()
		if _, err := post(ctx, p.client, u, "application/x-www-form-urlencoded", body); err == nil {
			d := time.Since(t0)
			p.mu.Lock()
			p.lat = append(p.lat, d)
			p.mu.Unlock()
		}
	})
}

// wait waits for the requests in flight and returns the latencies.
func (p *prober) wait() []time.Duration {
	p.sent.Wait()
	p.client.CloseIdleConnections()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lat
}

// ackHistogram scrapes Airlock's /metrics for the cumulative counts of
// airlock_ack_seconds's buckets, by upper bound (seconds).
func ackHistogram(ctx context.Context, client *http.Client, base string) (map[float64]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape metrics: %s", resp.Status)
	}
	buckets := map[float64]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if bound, n, ok := ackBucket(sc.Text()); ok {
			buckets[bound] = n
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("scrape metrics: %w", err)
	}
	if len(buckets) == 0 {
		return nil, errors.New("scrape metrics: no airlock_ack_seconds buckets for slack")
	}
	return buckets, nil
}

// ackBucket reads one line of the exposition format if it is a bucket
// of Slack's airlock_ack_seconds:
//
//	airlock_ack_seconds_bucket{platform="slack",le="0.001"} 3980
func ackBucket(line string) (bound, count float64, ok bool) {
	line, ok = strings.CutPrefix(line, `airlock_ack_seconds_bucket{platform="slack",le="`)
	if !ok {
		return 0, 0, false
	}
	le, n, ok := strings.Cut(line, `"} `)
	bound, err1 := strconv.ParseFloat(le, 64)
	count, err2 := strconv.ParseFloat(n, 64)
	return bound, count, ok && err1 == nil && err2 == nil
}

// bucketQuantile is the upper bound of the bucket holding the q-quantile
// of what was observed between two scrapes of a histogram (+Inf when it
// is past the last bound).
func bucketQuantile(before, after map[float64]float64, q float64) float64 {
	bounds := slices.Sorted(maps.Keys(after))
	total := after[math.Inf(1)] - before[math.Inf(1)]
	for _, b := range bounds {
		if after[b]-before[b] >= q*total {
			return b
		}
	}
	return math.Inf(1)
}
