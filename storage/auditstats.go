package storage

import (
	"context"
	"encoding/json"
	"math"
	"sort"
	"time"

	"github.com/airlockhq/airlock/confirm"
)

// Decision figures from the audit (airlock audit stats; docs/audit.md).
// A card is a call a person was asked about (named pending by an
// approval_request row); its time to decide runs from that row to the
// call's decision row by a person.

// StampWithin is how fast an allow counts as quick (AllowedWithin).
const StampWithin = 10 * time.Second

// Rubber-stamp thresholds: tools allowed in at least StampShare of at
// least StampMinCards cards with a median under StampWithin.
const (
	StampShare    = 0.95
	StampMinCards = 20
)

// ToolStats are one tool's figures.
type ToolStats struct {
	Tool      string `json:"tool"`
	Cards     int    `json:"cards"`
	Allowed   int    `json:"allowed"`
	Denied    int    `json:"denied"`
	Expired   int    `json:"expired"`
	Abandoned int    `json:"abandoned"` // the conversation moved on before anyone decided
	// Waiting cards have no decision yet (or none of the above): Cards is
	// Allowed + Denied + Expired + Abandoned + Waiting.
	Waiting int `json:"waiting"`
	Edited  int `json:"edited"` // cards whose arguments an approver edited (and so allowed)
	// Median and P90 of the time to decide the cards a person decided
	// (allowed or denied), in seconds; 0 when none was.
	MedianSeconds float64 `json:"median_seconds"`
	P90Seconds    float64 `json:"p90_seconds"`
	// AllowedWithin10s is the share of the cards allowed within 10 s (0–1).
	AllowedWithin10s float64 `json:"allowed_within_10s"`
	GrantsMade       int     `json:"grants_made"`
	GrantsUsed       int     `json:"grants_used"`
	times            []time.Duration
	quick            int
}

// ApproverStats are one approver's final decisions of cards.
type ApproverStats struct {
	Approver      string  `json:"approver"`
	Decisions     int     `json:"decisions"`
	MedianSeconds float64 `json:"median_seconds"`
	// Passkey and SSO count the decisions made on the web console's page
	// with a passkey, and after a fresh sign-in (step-up); the others
	// were chat clicks (or a page without either).
	Passkey int `json:"passkey"`
	SSO     int `json:"sso"`
	times   []time.Duration
}

// AuditStats are the decision figures of the audit rows from Since on.
type AuditStats struct {
	Since     time.Time       `json:"since"`
	Tools     []ToolStats     `json:"tools"`     // most cards first
	Approvers []ApproverStats `json:"approvers"` // most decisions first
}

// RubberStamped are the tools allowed in at least 95% of at least 20
// cards with a median time to decide under 10 s.
func (s AuditStats) RubberStamped() []ToolStats {
	var out []ToolStats
	for _, t := range s.Tools {
		if t.Cards >= StampMinCards && float64(t.Allowed) >= StampShare*float64(t.Cards) && t.MedianSeconds < StampWithin.Seconds() {
			out = append(out, t)
		}
	}
	return out
}

// AuditStats reads the audit rows at or after since (all when zero), in id
// order, and folds them into per tool and per approver figures; one pass
// and a sort per tool.
func (db *DB) AuditStats(ctx context.Context, since time.Time) (AuditStats, error) {
	type card struct {
		tool   string
		paused time.Time
	}
	tools := map[string]*ToolStats{}
	approvers := map[string]*ApproverStats{}
	toolOf := map[string]string{} // batch/key → tool, from tool_call rows
	cards := map[string]*card{}   // open cards
	edited := map[string]bool{}
	tool := func(name string) *ToolStats {
		t := tools[name]
		if t == nil {
			t = &ToolStats{Tool: name}
			tools[name] = t
		}
		return t
	}
	key := func(batch, call string) string { return batch + "\x00" + call }
	err := db.AuditRecords(ctx, 0, AuditRecordFilter{Since: since}, func(r AuditRecord) error {
		switch confirm.AuditKind(r.Kind) {
		case confirm.AuditToolCall:
			toolOf[key(r.BatchID, r.CallKey)] = r.Tool
		case confirm.AuditApprovalRequest:
			var d struct {
				Pending []string `json:"pending"`
			}
			_ = json.Unmarshal([]byte(r.Detail), &d)
			for _, k := range d.Pending {
				name, ok := toolOf[key(r.BatchID, k)]
				if !ok {
					continue // its tool_call row is before since
				}
				cards[key(r.BatchID, k)] = &card{tool: name, paused: r.At}
				tool(name).Cards++
			}
		case confirm.AuditEdited:
			k := key(r.BatchID, r.CallKey)
			if c := cards[k]; c != nil && !edited[k] {
				edited[k] = true
				tool(c.tool).Edited++
			}
		case confirm.AuditGrantCreated:
			tool(r.Tool).GrantsMade++
		case confirm.AuditGrantUsed:
			tool(r.Tool).GrantsUsed++
		case confirm.AuditDecision:
			k := key(r.BatchID, r.CallKey)
			c := cards[k]
			if c == nil {
				return nil // decided at pause time, or its card is before since
			}
			delete(cards, k)
			var d struct {
				Status    string `json:"status"`
				Abandoned bool   `json:"abandoned"`
				Assurance string `json:"assurance"`
			}
			_ = json.Unmarshal([]byte(r.Detail), &d)
			t := tool(c.tool)
			took := r.At.Sub(c.paused)
			switch s := confirm.DecisionStatus(d.Status); {
			case s == confirm.DecisionExpired:
				t.Expired++
				return nil
			case d.Abandoned:
				t.Abandoned++
				return nil
			case s == confirm.DecisionAllowed:
				t.Allowed++
				if took <= StampWithin {
					t.quick++
				}
			case s == confirm.DecisionDenied:
				t.Denied++
			default:
				return nil
			}
			t.times = append(t.times, took)
			a := approvers[r.Actor]
			if a == nil {
				a = &ApproverStats{Approver: r.Actor}
				approvers[r.Actor] = a
			}
			a.Decisions++
			a.times = append(a.times, took)
			switch confirm.Assurance(d.Assurance) {
			case confirm.AssurancePasskey:
				a.Passkey++
			case confirm.AssuranceSSO:
				a.SSO++
			}
		}
		return nil
	})
	if err != nil {
		return AuditStats{}, err
	}
	out := AuditStats{Since: since, Tools: []ToolStats{}, Approvers: []ApproverStats{}}
	for _, t := range tools {
		t.Waiting = t.Cards - t.Allowed - t.Denied - t.Expired - t.Abandoned
		t.MedianSeconds, t.P90Seconds = median(t.times), percentile(t.times, 0.9)
		if t.Cards > 0 {
			t.AllowedWithin10s = float64(t.quick) / float64(t.Cards)
		}
		out.Tools = append(out.Tools, *t)
	}
	for _, a := range approvers {
		a.MedianSeconds = median(a.times)
		out.Approvers = append(out.Approvers, *a)
	}
	sort.Slice(out.Tools, func(i, j int) bool {
		a, b := out.Tools[i], out.Tools[j]
		return a.Cards > b.Cards || (a.Cards == b.Cards && a.Tool < b.Tool)
	})
	sort.Slice(out.Approvers, func(i, j int) bool {
		a, b := out.Approvers[i], out.Approvers[j]
		return a.Decisions > b.Decisions || (a.Decisions == b.Decisions && a.Approver < b.Approver)
	})
	return out, nil
}

// median is the middle time in seconds (the mean of the two middle ones
// of an even count); 0 for none.
func median(ds []time.Duration) float64 {
	if len(ds) == 0 {
		return 0
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	n := len(ds)
	if n%2 == 1 {
		return ds[n/2].Seconds()
	}
	return (ds[n/2-1] + ds[n/2]).Seconds() / 2
}

// percentile is the nearest-rank percentile p (0–1) in seconds: the
// smallest time at least p of the times are at or under; 0 for none.
func percentile(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	rank := int(math.Ceil(p * float64(len(ds))))
	return ds[max(rank, 1)-1].Seconds()
}
