package web

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/airlockhq/airlock/gateway"
	"github.com/airlockhq/airlock/storage"
)

// The audit page (/ui/audit), for the people web.auditors names (anyone
// else gets 404): the newest rows the filters select (conversation, tool,
// actor, gateway client, since and until a date), the chain's verification on demand, and the export of
// the filtered rows as JSON lines or CSV, as `airlock audit export`
// writes them.

// Audit is what the audit page reads (*storage.DB has it).
type Audit interface {
	RecentAudit(ctx context.Context, f storage.AuditRecordFilter, limit int) ([]storage.AuditRecord, error)
	VerifyAudit(ctx context.Context, anchors ...storage.AuditCheckpoint) (storage.AuditVerification, error)
	ExportAudit(ctx context.Context, f storage.AuditRecordFilter, format string, w io.Writer) error
}

var _ Audit = (*storage.DB)(nil)

// auditRows is how many rows the page shows.
const auditRows = 200

// auditView is what the audit page's template reads.
type auditView struct {
	Rows      []storage.AuditRecord
	Filter    auditQuery
	Verified  *storage.AuditVerification
	VerifyErr string
	Export    string // the export's query
}

type auditQuery struct {
	Conversation, Tool, Actor, Client, Since, Until string
}

// auditFilter reads the filters; a malformed one is an error naming it.
func auditFilter(r *http.Request) (storage.AuditRecordFilter, auditQuery, error) {
	q := r.URL.Query()
	aq := auditQuery{Conversation: q.Get("conversation"), Tool: q.Get("tool"), Actor: q.Get("actor"), Client: q.Get("client"),
		Since: q.Get("since"), Until: q.Get("until")}
	f := storage.AuditRecordFilter{Tool: aq.Tool, Actor: aq.Actor}
	if aq.Client != "" {
		if strings.Contains(aq.Client, "/") {
			return f, aq, errors.New("client: a gateway client's name, such as claude-code")
		}
		f.ThreadPrefixes = gateway.ClientThreads(aq.Client)
	}
	if aq.Conversation != "" {
		id, err := strconv.ParseInt(aq.Conversation, 10, 64)
		if err != nil || id <= 0 {
			return f, aq, errors.New("conversation: a conversation's number, such as 7")
		}
		f.ConversationID = id
	}
	if aq.Since != "" {
		t, err := time.Parse("2006-01-02", aq.Since)
		if err != nil {
			return f, aq, errors.New("since: a date, such as 2026-12-01")
		}
		f.Since = t
	}
	if aq.Until != "" {
		t, err := time.Parse("2006-01-02", aq.Until)
		if err != nil {
			return f, aq, errors.New("until: a date, such as 2026-12-07 (its rows included)")
		}
		f.Until = t.Add(24 * time.Hour)
	}
	return f, aq, nil
}

func (s *Server) auditor(se session) bool { return s.audit != nil && s.cfg.Auditor(se.who.Email) }

func (s *Server) auditPage(w http.ResponseWriter, r *http.Request, se session) {
	if !s.auditor(se) {
		s.notFound(w, r)
		return
	}
	f, aq, err := auditFilter(r)
	d := pageData{Title: s.w.Audit, Who: se.who, CSRF: se.csrf, Auditor: true}
	if err != nil {
		d.Message = s.w.FilterUnreadable + err.Error()
		d.Audit = &auditView{Filter: aq}
		s.page(w, http.StatusBadRequest, "audit", d)
		return
	}
	rows, err := s.audit.RecentAudit(r.Context(), f, auditRows)
	if err != nil {
		s.fail(w, r, "audit", err)
		return
	}
	v := &auditView{Rows: rows, Filter: aq, Export: r.URL.Query().Encode()}
	if r.URL.Query().Get("verify") == "1" {
		res, err := s.audit.VerifyAudit(r.Context())
		if err != nil {
			s.log.Warn("web: audit verification failed", "err", err)
			v.VerifyErr = err.Error()
		} else {
			v.Verified = &res
		}
	}
	d.Audit = v
	s.page(w, http.StatusOK, "audit", d)
}

func (s *Server) auditExport(w http.ResponseWriter, r *http.Request, se session) {
	if !s.auditor(se) {
		s.notFound(w, r)
		return
	}
	f, _, err := auditFilter(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	format, ext, ctype := "jsonl", "jsonl", "application/x-ndjson"
	if r.URL.Query().Get("format") == "csv" {
		format, ext, ctype = "csv", "csv", "text/csv"
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="airlock-audit.%s"`, ext))
	if err := s.audit.ExportAudit(r.Context(), f, format, w); err != nil {
		s.log.Error("web: audit export", "err", err) // the response has begun: logged only
	}
}
