package bench

import (
	"math"
	"testing"
)

// The handler's ack p99 is read from the histogram's growth between two
// scrapes: the bucket holding it, or past the last bound.
func TestBucketQuantile(t *testing.T) {
	inf := math.Inf(1)
	before := map[float64]float64{0.001: 90, 0.01: 95, 1: 100, inf: 100}
	for _, c := range []struct {
		after map[float64]float64
		q     float64
		want  float64
	}{
		{map[float64]float64{0.001: 188, 0.01: 195, 1: 200, inf: 200}, 0.99, 0.01}, // 98 of 100 in the first bucket
		{map[float64]float64{0.001: 189, 0.01: 195, 1: 200, inf: 200}, 0.99, 0.001},
		{map[float64]float64{0.001: 100, 0.01: 105, 1: 109, inf: 200}, 0.5, inf},
		{map[float64]float64{0.001: 90, 0.01: 95, 1: 150, inf: 150}, 0.99, 1},
	} {
		if got := bucketQuantile(before, c.after, c.q); got != c.want {
			t.Errorf("q %v of %v: %v, want %v", c.q, c.after, got, c.want)
		}
	}
}
