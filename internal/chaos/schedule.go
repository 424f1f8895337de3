package chaos

import (
	"math/rand/v2"
	"sort"
	"time"
)

// faultKind is one kind of injected fault.
type faultKind int

const (
	faultNone     faultKind = iota
	faultSlack429           // chat.postMessage and chat.update answer 429 with Retry-After
	faultSlack5xx           // they answer 503
	faultToolSlow           // the tool service answers after the tools' timeout
	faultDBAway             // PostgreSQL's connections cut (or the server restarted)
)

func (k faultKind) String() string {
	return [...]string{"none", "slack 429", "slack 5xx", "slow tool", "database away"}[k]
}

// fault is one stretch of a fault.
type fault struct {
	kind       faultKind
	from, to   time.Time
	retryAfter int // seconds, for faultSlack429
}

// schedule is the soak's faults and kills, drawn from its seed before it
// starts, so a seed replays the same schedule.
type schedule struct {
	faults []fault     // in order of from; they do not overlap
	kills  []time.Time // when Airlock is SIGKILLed
	start  time.Time
}

// newSchedule draws the faults of a soak of duration d starting at start:
// a stretch every 4 to 15 s, of 2 to 15 s, never in the first or the
// last 5 s; and a kill about every killEvery (±30%).
func newSchedule(rng *rand.Rand, start time.Time, d, killEvery time.Duration, db bool) *schedule {
	s := &schedule{start: start}
	between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo)+1)) }
	for t := 5 * time.Second; ; {
		t += between(4*time.Second, 15*time.Second)
		f := fault{}
		switch r := rng.IntN(100); {
		case r < 35:
			f.kind, f.retryAfter = faultSlack429, 1+rng.IntN(2)
		case r < 65:
			f.kind = faultSlack5xx
		case r < 80:
			f.kind = faultToolSlow
		case db:
			f.kind = faultDBAway
		default:
			f.kind = faultSlack5xx
		}
		length := map[faultKind][2]time.Duration{
			faultSlack429: {3 * time.Second, 8 * time.Second}, faultSlack5xx: {5 * time.Second, 15 * time.Second},
			faultToolSlow: {3 * time.Second, 6 * time.Second}, faultDBAway: {2 * time.Second, 6 * time.Second},
		}[f.kind]
		end := t + between(length[0], length[1])
		if end > d-5*time.Second {
			break
		}
		f.from, f.to = start.Add(t), start.Add(end)
		s.faults = append(s.faults, f)
		t = end
	}
	if killEvery > 0 {
		for t := time.Duration(0); ; {
			t += killEvery*7/10 + time.Duration(rng.Int64N(int64(killEvery*6/10)+1))
			if t > d-5*time.Second {
				break
			}
			s.kills = append(s.kills, start.Add(t))
		}
	}
	sort.Slice(s.kills, func(i, j int) bool { return s.kills[i].Before(s.kills[j]) })
	return s
}

// at is the fault in force at t (kind faultNone: none).
func (s *schedule) at(t time.Time) fault {
	if s == nil {
		return fault{}
	}
	i := sort.Search(len(s.faults), func(i int) bool { return s.faults[i].to.After(t) })
	if i < len(s.faults) && !t.Before(s.faults[i].from) {
		return s.faults[i]
	}
	return fault{}
}

// count is how many stretches of a kind the schedule has.
func (s *schedule) count(k faultKind) int {
	n := 0
	for _, f := range s.faults {
		if f.kind == k {
			n++
		}
	}
	return n
}
