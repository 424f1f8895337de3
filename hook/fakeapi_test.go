package hook

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeAPI speaks the approval API's wire format (issue 36) on 127.0.0.1:
// bearer tokens, approvals created pending (or decided by onCreate),
// long-polled, bound (a request with the same session, tool and
// arguments as one pending or allowed and not consumed is that one), and
// consumed once.
type fakeAPI struct {
	t     *testing.T
	srv   *httptest.Server
	token string
	// onCreate, when set, decides a new approval before it is answered.
	onCreate func(a *fakeApproval)

	mu        sync.Mutex
	approvals map[string]*fakeApproval
	order     []string
	consumes  int
	requests  []Request
}

type fakeApproval struct {
	Approval
	req      Request
	consumed bool
	changed  chan struct{}
}

func newFakeAPI(t *testing.T) *fakeAPI {
	f := &fakeAPI{t: t, token: strings.Repeat("t", 40), approvals: map[string]*fakeApproval{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/approvals", f.create)
	mux.HandleFunc("GET /v1/approvals/{id}", f.get)
	mux.HandleFunc("POST /v1/approvals/{id}/consume", f.consume)
	f.srv = httptest.NewServer(f.auth(mux))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAPI) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+f.token {
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "unauthorized"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func bindKey(r Request) string {
	var v any
	_ = json.Unmarshal(r.Args, &v)
	canon, _ := json.Marshal(v)
	return r.Session + "\x00" + r.Tool + "\x00" + string(canon)
}

func (f *fakeAPI) create(w http.ResponseWriter, r *http.Request) {
	var req Request
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Tool == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "tool: required"})
		return
	}
	wait, _ := time.ParseDuration(req.Wait)
	f.mu.Lock()
	f.requests = append(f.requests, req)
	var a *fakeApproval
	for _, id := range f.order {
		x := f.approvals[id]
		if bindKey(x.req) == bindKey(req) && (x.Status == StatusPending || (x.Status == StatusAllowed && !x.consumed)) {
			a = x
		}
	}
	if a == nil {
		id := fmt.Sprintf("a%d", len(f.order)+1)
		a = &fakeApproval{Approval: Approval{ID: id, Status: StatusPending, Args: req.Args, Where: "#ops",
			ExpiresAt: time.Now().Add(30 * time.Minute), CardURL: "https://slack.example/archives/C0OPS/p1"}, req: req, changed: make(chan struct{})}
		f.approvals[id], f.order = a, append(f.order, id)
		if f.onCreate != nil {
			f.onCreate(a)
		}
	}
	f.mu.Unlock()
	writeJSON(w, http.StatusOK, f.waitFor(a, wait))
}

func (f *fakeAPI) get(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	a, ok := f.approvals[r.PathValue("id")]
	f.mu.Unlock()
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no such approval"})
		return
	}
	wait, _ := time.ParseDuration(r.URL.Query().Get("wait"))
	writeJSON(w, http.StatusOK, f.waitFor(a, wait))
}

func (f *fakeAPI) consume(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, ok := f.approvals[r.PathValue("id")]
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no such approval"})
		return
	}
	if a.Status != StatusAllowed || a.consumed {
		why := a.Status
		if a.consumed {
			why = "already consumed"
		}
		writeJSON(w, http.StatusConflict, map[string]any{"error": why, "id": a.ID, "status": a.Status})
		return
	}
	a.consumed = true
	f.consumes++
	writeJSON(w, http.StatusOK, a.Approval)
}

// waitFor is a as it is once decided, or after wait.
func (f *fakeAPI) waitFor(a *fakeApproval, wait time.Duration) Approval {
	f.mu.Lock()
	st, ch := a.Approval, a.changed
	f.mu.Unlock()
	if st.Status != StatusPending || wait <= 0 {
		return st
	}
	select {
	case <-ch:
	case <-time.After(wait):
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return a.Approval
}

// decide decides approval id as an approver would.
func (f *fakeAPI) decide(id, status, reason string, args json.RawMessage) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a := f.approvals[id]
	if a == nil {
		f.t.Fatalf("no approval %s", id)
	}
	a.Status, a.Reason, a.DecidedBy = status, reason, "U0APPROVER"
	if args != nil {
		a.Args = args
	}
	close(a.changed)
	a.changed = make(chan struct{})
}

func (f *fakeAPI) counts() (approvals, consumes int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.order), f.consumes
}
