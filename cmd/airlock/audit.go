package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/airlockhq/airlock/card"
	"github.com/airlockhq/airlock/confirm"
)

// callRecord is the story of one tool call, told from the audit table.
type callRecord struct {
	ConversationID int64           `json:"conversation_id"`
	BatchID        string          `json:"batch_id"`
	Key            string          `json:"call_key"`
	Tool           string          `json:"tool"`
	AskedBy        string          `json:"asked_by"`
	Client         string          `json:"client,omitempty"`  // the gateway client that asked ("": Airlock's agent, a runbook)
	Session        string          `json:"session,omitempty"` // the gateway client's session
	AskedAt        time.Time       `json:"asked_at"`
	Args           json.RawMessage `json:"args"`
	Summary        string          `json:"summary,omitempty"`
	NeedsApproval  bool            `json:"needs_approval"`
	Reasons        []string        `json:"reasons,omitempty"`   // why a person was asked, or the rule that refused it
	Approvals      int             `json:"approvals,omitempty"` // distinct approvals it needed
	Rule           string          `json:"rule,omitempty"`      // the rule that refused it
	ApprovedBy     []approval      `json:"approved_by,omitempty"`
	Grant          *grantStory     `json:"grant,omitempty"` // the grant this call created or used
	Decision       string          `json:"decision"`
	DecidedBy      string          `json:"decided_by,omitempty"`
	DecidedVia     string          `json:"decided_via,omitempty"` // how the decider proved who they are: passkey, sso (the web console)
	DecidedAt      *time.Time      `json:"decided_at,omitempty"`
	DenyMessage    string          `json:"deny_message,omitempty"`
	Outcome        string          `json:"outcome"`
	Result         string          `json:"result,omitempty"`
	RejectedClicks []rejectedClick `json:"rejected_clicks,omitempty"`
	// Edits are approvers' changes of the arguments; Args stay the model's.
	Edits []edit `json:"edits,omitempty"`
	// Extended and Escalated are the card's Extend and the escalation
	// steps (1-based) that fired, shown on each call of the card.
	Extended  *extension `json:"extended,omitempty"`
	Escalated []int      `json:"escalated,omitempty"`
	// Checked is who marked an unknown outcome checked, and when.
	Checked *approval `json:"checked,omitempty"`
	// PreviewHash is the sha256 of the whole scrubbed output of the
	// preview the approver saw (tools[].preview); Recheck what running it again before the run
	// found (matched, changed, failed) and RecheckHash its hash.
	PreviewHash string `json:"preview_hash,omitempty"`
	Recheck     string `json:"recheck,omitempty"`
	RecheckHash string `json:"recheck_hash,omitempty"`
}

type edit struct {
	By     string          `json:"by"`
	At     time.Time       `json:"at"`
	Args   json.RawMessage `json:"args"`             // the arguments the call runs with
	Voided []string        `json:"voided,omitempty"` // approvals the edit voided
}

type extension struct {
	By    string    `json:"by"`
	At    time.Time `json:"at"`
	Until time.Time `json:"until"`
}

type approval struct {
	By  string    `json:"by"`
	At  time.Time `json:"at"`
	Via string    `json:"via,omitempty"` // how the voter proved who they are: passkey, sso (the web console)
}

// grantStory is a grant as the audit tells it: created by an "Allow for"
// on one call, used by later calls, maybe revoked.
type grantStory struct {
	ID        string     `json:"id"`
	Role      string     `json:"role"` // created | used
	By        string     `json:"by,omitempty"`
	Until     *time.Time `json:"until,omitempty"`
	RevokedBy string     `json:"revoked_by,omitempty"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
}

type rejectedClick struct {
	By  string    `json:"by"`
	At  time.Time `json:"at"`
	Why string    `json:"why"`
	// Suppressed: the same person's same rejections of the batch counted,
	// not recorded, since the previous row (rejected clicks are coalesced).
	Suppressed int64 `json:"suppressed,omitempty"`
}

// auditRecords folds audit events into one record per call, in the order
// the calls were asked for.
func auditRecords(events []confirm.AuditEvent) []*callRecord {
	byCall := map[string]*callRecord{}
	var order []*callRecord
	get := func(e confirm.AuditEvent) *callRecord {
		k := e.BatchID + "\x00" + e.CallKey
		r := byCall[k]
		if r == nil {
			r = &callRecord{ConversationID: e.ConversationID, BatchID: e.BatchID, Key: e.CallKey, Tool: e.Tool, Decision: "pending", Outcome: "not run"}
			byCall[k] = r
			order = append(order, r)
		}
		return r
	}
	for _, e := range events {
		switch e.Kind {
		case confirm.AuditToolCall:
			var d struct {
				Args      json.RawMessage  `json:"args"`
				Flagged   bool             `json:"flagged"`
				Decision  string           `json:"decision"`
				Summary   string           `json:"summary"`
				Reasons   []confirm.Reason `json:"reasons"`
				Approvals int              `json:"approvals"`
				Client    string           `json:"client"`
				Session   string           `json:"session"`
			}
			_ = json.Unmarshal([]byte(e.Detail), &d)
			r := get(e)
			r.AskedBy, r.AskedAt, r.Args, r.NeedsApproval, r.Summary = e.Actor, e.At, d.Args, d.Flagged, d.Summary
			r.Client, r.Session = d.Client, d.Session
			r.Approvals = d.Approvals
			for _, reason := range d.Reasons {
				r.Reasons = append(r.Reasons, reason.String())
			}
			if d.Decision != "" {
				r.Decision = d.Decision
			}
		case confirm.AuditDecision:
			var d struct {
				Status    string `json:"status"`
				Message   string `json:"message"`
				Reason    string `json:"reason"`
				Rule      string `json:"rule"`
				Assurance string `json:"assurance"`
			}
			_ = json.Unmarshal([]byte(e.Detail), &d)
			r := get(e)
			at := e.At
			r.Decision, r.DecidedBy, r.DecidedAt, r.DenyMessage, r.Rule = d.Status, e.Actor, &at, d.Message, d.Rule
			if d.Assurance != string(confirm.AssuranceChat) {
				r.DecidedVia = d.Assurance
			}
			if d.Reason != "" {
				r.DenyMessage = d.Reason
			}
			if d.Status == string(confirm.DecisionAllowed) && r.Approvals > 1 && (len(r.ApprovedBy) == 0 || r.ApprovedBy[len(r.ApprovedBy)-1].By != e.Actor) {
				r.ApprovedBy = append(r.ApprovedBy, approval{By: e.Actor, At: e.At, Via: r.DecidedVia})
			}
		case confirm.AuditApproval:
			var d struct {
				Assurance string `json:"assurance"`
			}
			_ = json.Unmarshal([]byte(e.Detail), &d)
			r := get(e)
			a := approval{By: e.Actor, At: e.At}
			if d.Assurance != string(confirm.AssuranceChat) {
				a.Via = d.Assurance
			}
			r.ApprovedBy = append(r.ApprovedBy, a)
		case confirm.AuditGrantCreated, confirm.AuditGrantUsed, confirm.AuditGrantRevoked:
			var d struct {
				GrantID   string    `json:"grant_id"`
				ExpiresAt time.Time `json:"expires_at"`
			}
			_ = json.Unmarshal([]byte(e.Detail), &d)
			r := get(e)
			switch e.Kind {
			case confirm.AuditGrantCreated:
				until := d.ExpiresAt
				r.Grant = &grantStory{ID: d.GrantID, Role: "created", By: e.Actor, Until: &until}
			case confirm.AuditGrantUsed:
				r.Grant = &grantStory{ID: d.GrantID, Role: "used"}
			case confirm.AuditGrantRevoked:
				if r.Grant == nil {
					r.Grant = &grantStory{ID: d.GrantID, Role: "created"}
				}
				at := e.At
				r.Grant.RevokedBy, r.Grant.RevokedAt = e.Actor, &at
			}
		case confirm.AuditToolResult:
			var d struct {
				Status string `json:"status"`
				Result string `json:"result"`
				// A call with a preview (tools[].preview).
				PreviewHash string `json:"preview_hash"`
				Recheck     string `json:"recheck"`
				RecheckHash string `json:"recheck_hash"`
			}
			_ = json.Unmarshal([]byte(e.Detail), &d)
			r := get(e)
			r.Outcome, r.Result = d.Status, d.Result
			r.PreviewHash, r.Recheck, r.RecheckHash = d.PreviewHash, d.Recheck, d.RecheckHash
		case confirm.AuditEdited:
			var d struct {
				After  json.RawMessage `json:"after"`
				Voided []string        `json:"voided"`
			}
			_ = json.Unmarshal([]byte(e.Detail), &d)
			r := get(e)
			r.Edits = append(r.Edits, edit{By: e.Actor, At: e.At, Args: d.After, Voided: d.Voided})
		case confirm.AuditExtended, confirm.AuditEscalated:
			var d struct {
				Until time.Time `json:"until"`
				Step  int       `json:"step"`
			}
			_ = json.Unmarshal([]byte(e.Detail), &d)
			for _, r := range order {
				if r.BatchID != e.BatchID {
					continue
				}
				if e.Kind == confirm.AuditExtended {
					r.Extended = &extension{By: e.Actor, At: e.At, Until: d.Until}
				} else {
					r.Escalated = append(r.Escalated, d.Step)
				}
			}
		case confirm.AuditUnknownChecked:
			get(e).Checked = &approval{By: e.Actor, At: e.At}
		case confirm.AuditRejectedClick:
			if e.CallKey == "" {
				continue // a button that named no call
			}
			var d struct {
				Why        string `json:"why"`
				Suppressed int64  `json:"suppressed"`
			}
			_ = json.Unmarshal([]byte(e.Detail), &d)
			r := get(e)
			r.RejectedClicks = append(r.RejectedClicks, rejectedClick{By: e.Actor, At: e.At, Why: d.Why, Suppressed: d.Suppressed})
		}
	}
	sort.SliceStable(order, func(i, j int) bool { return order[i].AskedAt.Before(order[j].AskedAt) })
	return order
}

func audit(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "verify":
			return auditVerify(ctx, args[1:], stdout, stderr)
		case "export":
			return auditExport(ctx, args[1:], stdout, stderr)
		case "stats":
			return auditStats(ctx, args[1:], stdout, stderr)
		}
	}
	fs, cfgPath := configFlags("airlock audit", stderr)
	conv := fs.Int64("conversation", 0, "only this conversation id")
	since := fs.String("since", "", "only events at or after this time (RFC 3339) or this long ago (e.g. 7d, 24h)")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	w, err := parseWhen("since", *since)
	if err != nil {
		fmt.Fprintf(stderr, "airlock: %v\n", err)
		return 2
	}
	_, db := openStoreFor(ctx, *cfgPath, stderr)
	if db == nil {
		return 1
	}
	defer db.Close()
	f := confirm.AuditFilter{ConversationID: *conv, Since: w.time(db.Clock())}
	return printAudit(ctx, db, f, *asJSON, stdout, stderr)
}

// printAudit prints the tool calls of the audit events f selects, using
// only the store's audit.
func printAudit(ctx context.Context, db confirm.AuditStore, f confirm.AuditFilter, asJSON bool, stdout, stderr io.Writer) int {
	events, err := db.AuditEvents(ctx, f)
	if err != nil {
		fmt.Fprintf(stderr, "airlock: %v\n", err)
		return 1
	}
	records := auditRecords(events)
	if asJSON {
		// Compact, so each call's arguments are the exact bytes the model sent.
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		if records == nil {
			records = []*callRecord{}
		}
		if err := enc.Encode(records); err != nil {
			fmt.Fprintf(stderr, "airlock: %v\n", err)
			return 1
		}
		return 0
	}
	printRecords(stdout, records)
	printRunbookEvents(stdout, events)
	return 0
}

func printRecords(w io.Writer, records []*callRecord) {
	if len(records) == 0 {
		fmt.Fprintln(w, "no tool calls recorded")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ASKED (UTC)\tCONV\tCALL\tTOOL\tASKED BY\tDECISION\tDECIDED BY\tDECIDED (UTC)\tOUTCOME\tARGS")
	for _, r := range records {
		decided := "-"
		if r.DecidedAt != nil {
			decided = r.DecidedAt.UTC().Format(time.DateTime)
		}
		by := r.DecidedBy
		if by == "" {
			by = "-"
		}
		if r.DecidedVia != "" {
			by += " (" + r.DecidedVia + ")"
		}
		outcome := r.Outcome
		if r.Outcome == "failed" || r.Outcome == "unknown" {
			outcome += ": " + card.Excerpt(card.OneLine(r.Result), 60)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s/%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			r.AskedAt.UTC().Format(time.DateTime), r.ConversationID, shortID(r.BatchID), r.Key, r.Tool, r.AskedBy,
			r.Decision, by, decided, outcome, card.Excerpt(card.OneLine(string(r.Args)), 200))
		if r.Client != "" {
			fmt.Fprintf(tw, "\t\t\t\t  asked by client\t%s, session %s\t\t\t\t\n", r.Client, card.Excerpt(card.OneLine(r.Session), 80))
		}
		if len(r.Reasons) > 0 {
			need := ""
			if r.Approvals > 1 {
				need = fmt.Sprintf("%d approvals: ", r.Approvals)
			}
			fmt.Fprintf(tw, "\t\t\t\t  why asked\t%s%s\t\t\t\t\n", need, strings.Join(r.Reasons, "; "))
		}
		if r.Rule != "" {
			fmt.Fprintf(tw, "\t\t\t\t  refused by rule\t%s\t\t\t\t\n", r.Rule)
		}
		for _, a := range r.ApprovedBy {
			by := a.By
			if a.Via != "" {
				by += " (" + a.Via + ")"
			}
			fmt.Fprintf(tw, "\t\t\t\t  approval\t\t%s\t%s\t\t\n", by, a.At.UTC().Format(time.DateTime))
		}
		if c := r.Checked; c != nil {
			fmt.Fprintf(tw, "\t\t\t\t  checked\t\t%s\t%s\t\t\n", c.By, c.At.UTC().Format(time.DateTime))
		}
		if r.PreviewHash != "" || r.Recheck != "" {
			pv := "sha256 " + shortHash(r.PreviewHash)
			if r.Recheck != "" {
				pv += "; recheck " + r.Recheck
				if r.RecheckHash != "" && r.RecheckHash != r.PreviewHash {
					pv += " (sha256 " + shortHash(r.RecheckHash) + ")"
				}
			}
			fmt.Fprintf(tw, "\t\t\t\t  preview\t%s\t\t\t\t\n", pv)
		}
		if g := r.Grant; g != nil {
			line := "grant " + g.ID + " " + g.Role
			if g.Until != nil {
				line += " until " + g.Until.UTC().Format(time.DateTime)
			}
			if g.RevokedAt != nil {
				line += fmt.Sprintf("; revoked by %s at %s", g.RevokedBy, g.RevokedAt.UTC().Format(time.DateTime))
			}
			fmt.Fprintf(tw, "\t\t\t\t  %s\t\t%s\t\t\t\n", line, g.By)
		}
		for _, e := range r.Edits {
			line := "edited to " + card.Excerpt(card.OneLine(string(e.Args)), 120)
			if len(e.Voided) > 0 {
				line += "; voided approvals of " + strings.Join(e.Voided, ", ")
			}
			fmt.Fprintf(tw, "\t\t\t\t  edit\t%s\t%s\t%s\t\t\n", line, e.By, e.At.UTC().Format(time.DateTime))
		}
		if x := r.Extended; x != nil {
			fmt.Fprintf(tw, "\t\t\t\t  extended\tuntil %s\t%s\t%s\t\t\n", x.Until.UTC().Format(time.DateTime), x.By, x.At.UTC().Format(time.DateTime))
		}
		for _, st := range r.Escalated {
			fmt.Fprintf(tw, "\t\t\t\t  escalated\tstep %d\t\t\t\t\n", st)
		}
		for _, c := range r.RejectedClicks {
			why := c.Why
			if c.Suppressed > 0 {
				why += fmt.Sprintf(" (and %d more before, not recorded)", c.Suppressed)
			}
			fmt.Fprintf(tw, "\t\t\t\t  rejected click\t%s\t%s\t%s\t\t\n", why, c.By, c.At.UTC().Format(time.DateTime))
		}
	}
	tw.Flush()
}

func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// shortHash is a hash's first 12 hex digits; "-" for none.
func shortHash(h string) string {
	if h == "" {
		return "-"
	}
	return confirm.ShortHash(h)
}
