package metrics

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/airlockhq/airlock/jobs"
)

var (
	descName   = regexp.MustCompile(`^Desc\{fqName: "([^"]+)"`)
	descLabels = regexp.MustCompile(`variableLabels: \{([^}]*)\}\}$`)
)

// held adds to served the name and label names of every collector v
// holds: a collector field, or one inside a struct field or a slice (the
// runbook and card-sync groups), read whether exported or not.
func held(v reflect.Value, served map[string][]string) {
	if v.CanAddr() && !v.CanInterface() {
		v = reflect.NewAt(v.Type(), unsafe.Pointer(v.UnsafeAddr())).Elem()
	}
	if v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return
		}
	}
	if c, ok := v.Interface().(prometheus.Collector); ok {
		ch := make(chan *prometheus.Desc, 16)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			s := d.String()
			name, labels := descName.FindStringSubmatch(s), descLabels.FindStringSubmatch(s)
			if name == nil || labels == nil {
				panic("unexpected Desc: " + s)
			}
			served[name[1]] = nil
			if labels[1] != "" {
				served[name[1]] = strings.Split(labels[1], ",")
			}
		}
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			held(v.Field(i), served)
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			held(v.Index(i), served)
		}
	}
}

// servedMetrics are the airlock_ metrics GET /metrics serves, with their
// label names: every collector a *Metrics holds, what its registry
// gathers (the pending approvals' gauge), and the background jobs'
// metrics a jobs runner adds to it.
func servedMetrics(t *testing.T) map[string][]string {
	t.Helper()
	m := New(func() float64 { return 0 })
	r := jobs.New(jobs.Options{Registerer: m.Registerer()})
	if err := r.Add(jobs.Job{Name: "sweep", Every: time.Hour, Timeout: time.Minute, Run: func(context.Context) error { return nil }}); err != nil {
		t.Fatal(err)
	}
	served := map[string][]string{}
	held(reflect.ValueOf(m).Elem(), served)
	families, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		var labels []string
		if len(f.GetMetric()) > 0 {
			for _, l := range f.GetMetric()[0].GetLabel() {
				labels = append(labels, l.GetName())
			}
		}
		served[f.GetName()] = labels
	}
	for name := range served {
		if !strings.HasPrefix(name, "airlock_") {
			delete(served, name) // the Go runtime's and the process's
		}
	}
	return served
}

// docMetric is a row of the metrics table in docs/operations.md: the
// metric's name and its labels, each a code span.
var docMetric = regexp.MustCompile("(?m)^\\| `(airlock_[a-z0-9_]+)` \\| ([^|]*)\\|")

// Every metric GET /metrics serves has a row in docs/operations.md with
// its labels, and every row names a metric that is served: metric names
// and labels are an interface of operators' dashboards.
func TestEveryMetricIsDocumented(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string][]string{}
	for _, m := range docMetric.FindAllStringSubmatch(string(data), -1) {
		var labels []string
		for _, l := range strings.Split(m[2], ",") {
			if l = strings.Trim(strings.TrimSpace(l), "`"); l != "" {
				labels = append(labels, l)
			}
		}
		documented[m[1]] = labels
	}
	served := servedMetrics(t)
	if len(served) < 15 {
		t.Fatalf("found %d served metrics; the walk is broken: %v", len(served), served)
	}
	for name, labels := range served {
		doc, ok := documented[name]
		if !ok {
			t.Errorf("metric %s (labels %v) has no row in docs/operations.md", name, labels)
			continue
		}
		slices.Sort(doc)
		slices.Sort(labels)
		if !slices.Equal(doc, labels) {
			t.Errorf("metric %s: docs/operations.md says labels %v, served with %v", name, doc, labels)
		}
	}
	for name := range documented {
		if _, ok := served[name]; !ok {
			t.Errorf("docs/operations.md lists %s, which is not served", name)
		}
	}
}
