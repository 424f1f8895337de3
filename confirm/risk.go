package confirm

import "fmt"

// Risk is how much harm a gated call could do, as the operator rates it
// (tools[].risk, a rule's risk). The highest of a call's verdicts wins.
// High and critical calls are never covered by a grant.
type Risk string

const (
	RiskLow      Risk = "low"
	RiskMedium   Risk = "medium" // the default of a gated call
	RiskHigh     Risk = "high"
	RiskCritical Risk = "critical"
)

// risks are the tiers, lowest first.
var risks = []Risk{RiskLow, RiskMedium, RiskHigh, RiskCritical}

// ParseRisk accepts a tier's name; "" is no tier (the default applies).
func ParseRisk(s string) (Risk, error) {
	if s == "" {
		return "", nil
	}
	for _, r := range risks {
		if string(r) == s {
			return r, nil
		}
	}
	return "", fmt.Errorf("%q: must be low, medium, high or critical", s)
}

// rank orders the tiers; "" ranks below low.
func (r Risk) rank() int {
	for i, t := range risks {
		if t == r {
			return i + 1
		}
	}
	return 0
}

// Max is the higher of two tiers.
func (r Risk) Max(o Risk) Risk {
	if o.rank() > r.rank() {
		return o
	}
	return r
}

// Or is r, or def when r is no tier.
func (r Risk) Or(def Risk) Risk {
	if r == "" {
		return def
	}
	return r
}

// NoGrant reports whether no grant may cover a call of this tier.
func (r Risk) NoGrant() bool { return r.rank() >= RiskHigh.rank() }
