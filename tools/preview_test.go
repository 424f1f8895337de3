//go:build unix

package tools

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/keyerr"
	"github.com/airlockhq/airlock/redact"
)

func previewTool(t *testing.T, p *PreviewConfig, opts Options) Previewer {
	t.Helper()
	s := mustNew(t, []Config{{Name: "apply", Parameters: shellSchema, Exec: &ExecConfig{Command: []string{"true"}}, Preview: p}}, opts)
	pv, ok := PreviewOf(mustGet(t, s, "apply"))
	if !ok {
		t.Fatal("PreviewOf: the tool has no preview")
	}
	return pv
}

func TestPreviewConfigErrorsNameTheKey(t *testing.T) {
	run := &ExecConfig{Command: []string{"true"}}
	cases := []struct {
		name string
		p    *PreviewConfig
		key  string
		want string
	}{
		{"neither", &PreviewConfig{}, "tools[1].preview", "exactly one of http or exec"},
		{"both", &PreviewConfig{Exec: run, HTTP: &HTTPConfig{URL: "http://h/"}}, "tools[1].preview", "exactly one of http or exec"},
		{"exec timeout too long", &PreviewConfig{Exec: &ExecConfig{Command: []string{"true"}, Timeout: 6 * time.Minute}}, "tools[1].preview.exec.timeout", "at most 5m0s"},
		{"http timeout too long", &PreviewConfig{HTTP: &HTTPConfig{URL: "http://h/", Timeout: time.Hour}}, "tools[1].preview.http.timeout", "at most 5m0s"},
		{"exec command", &PreviewConfig{Exec: &ExecConfig{}}, "tools[1].preview.exec.command", "required"},
		{"exec program templated", &PreviewConfig{Exec: &ExecConfig{Command: []string{"{{.x}}"}}}, "tools[1].preview.exec.command[0]", "must be literal"},
		{"http url", &PreviewConfig{HTTP: &HTTPConfig{URL: "https://{{.x}}/"}}, "tools[1].preview.http.url", "must start with a literal"},
		{"ok codes for http", &PreviewConfig{HTTP: &HTTPConfig{URL: "http://h/"}, OKExitCodes: []int{1}}, "tools[1].preview.ok_exit_codes", "only for an exec preview"},
		{"ok code range", &PreviewConfig{Exec: run, OKExitCodes: []int{0, 300}}, "tools[1].preview.ok_exit_codes[1]", "between 0 and 255"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New([]Config{httpTool("ok"), {Name: "a", Exec: run, Preview: tc.p}}, Options{})
			var ke *keyerr.Error
			if !errors.As(err, &ke) {
				t.Fatalf("error %v is not a *keyerr.Error", err)
			}
			if ke.Key != tc.key || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q (key %q), want key %q and %q", err, ke.Key, tc.key, tc.want)
			}
		})
	}
}

func TestPreviewOKExitCodes(t *testing.T) {
	// kubectl diff exits 1 when there is a difference: its output is the preview.
	pv := previewTool(t, &PreviewConfig{Exec: &ExecConfig{Command: []string{"sh", "-c", `echo "diff of $1"; exit 1`, "sh", "{{.x}}"}}, OKExitCodes: []int{0, 1}}, Options{})
	out, err := pv.Preview(context.Background(), json.RawMessage(`{"x":"web.yaml"}`))
	if err != nil || out != "diff of web.yaml\n" {
		t.Fatalf("Preview = %q, %v; want the diff", out, err)
	}
	// Exit 2 is not in the list: the preview failed, its output quoted.
	pv = previewTool(t, &PreviewConfig{Exec: &ExecConfig{Command: []string{"sh", "-c", `echo boom >&2; exit 2`}}, OKExitCodes: []int{0, 1}}, Options{})
	if _, err := pv.Preview(context.Background(), json.RawMessage(`{}`)); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("Preview exiting 2 = %v, want an error with its output", err)
	}
	// Default: only 0.
	pv = previewTool(t, &PreviewConfig{Exec: &ExecConfig{Command: []string{"sh", "-c", "exit 1"}}}, Options{})
	if _, err := pv.Preview(context.Background(), json.RawMessage(`{}`)); err == nil {
		t.Fatal("Preview exiting 1 without ok_exit_codes succeeded")
	}
}

func TestPreviewDefaultTimeout(t *testing.T) {
	s := mustNew(t, []Config{{Name: "a", Exec: &ExecConfig{Command: []string{"true"}}, Preview: &PreviewConfig{Exec: &ExecConfig{Command: []string{"true"}}}}}, Options{})
	ct := mustGet(t, s, "a").(*configTool)
	if got := ct.preview.(*execExecutor).timeout; got != DefaultPreviewTimeout {
		t.Errorf("preview timeout %s, want %s", got, DefaultPreviewTimeout)
	}
	if got := ct.exec.(*execExecutor).timeout; got != DefaultTimeout {
		t.Errorf("tool timeout %s, want %s (the preview's default must not leak)", got, DefaultTimeout)
	}
}

func TestPreviewTimesOut(t *testing.T) {
	pv := previewTool(t, &PreviewConfig{Exec: &ExecConfig{Command: []string{"sleep", "10"}, Timeout: 100 * time.Millisecond}}, Options{})
	t0 := time.Now()
	_, err := pv.Preview(context.Background(), json.RawMessage(`{}`))
	if err == nil || time.Since(t0) > 5*time.Second {
		t.Fatalf("Preview = %v after %s, want a timeout", err, time.Since(t0))
	}
}

// Hostile arguments cannot change the preview's command: argv templates,
// no shell, and a value that would become an option is refused by Validate.
func TestPreviewHostileArguments(t *testing.T) {
	s := mustNew(t, []Config{{Name: "apply", Parameters: shellSchema, Exec: &ExecConfig{Command: []string{"true", "{{.x}}"}},
		Preview: &PreviewConfig{Exec: &ExecConfig{Command: append(printArgs, "-f", "{{.x}}")}}}}, Options{})
	tool := mustGet(t, s, "apply")
	pv, _ := PreviewOf(tool)
	hostile := `{"x":"a.yaml; rm -rf / $(id) ` + "`id`" + `"}`
	out, err := pv.Preview(context.Background(), json.RawMessage(hostile))
	if err != nil {
		t.Fatal(err)
	}
	if want := "-f|a.yaml; rm -rf / $(id) `id`|"; out != want {
		t.Errorf("argv %q, want %q", out, want)
	}
	// "--server=evil" would become an option of the preview's program.
	s = mustNew(t, []Config{{Name: "apply", Parameters: shellSchema, Exec: &ExecConfig{Command: []string{"true"}},
		Preview: &PreviewConfig{Exec: &ExecConfig{Command: []string{"kubectl", "diff", "-f", "{{.x}}"}}}}}, Options{})
	err = mustGet(t, s, "apply").Validate(json.RawMessage(`{"x":"--server=https://evil"}`))
	if !errors.Is(err, ErrInvalidArgs) || !strings.Contains(err.Error(), "preview") {
		t.Errorf("Validate = %v, want invalid arguments naming the preview", err)
	}
}

func TestPreviewScrubbedAndHTTP(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("plan for " + r.URL.Path + " token=s3cr3t-value"))
	}))
	defer srv.Close()
	pv := previewTool(t, &PreviewConfig{HTTP: &HTTPConfig{Method: "GET", URL: srv.URL + "/plan/{{.x}}"}}, Options{Redactor: redact.New([]string{"s3cr3t-value"})})
	out, err := pv.Preview(context.Background(), json.RawMessage(`{"x":"web"}`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "s3cr3t") || !strings.HasPrefix(out, "plan for /plan/web") {
		t.Errorf("preview %q: want the plan, scrubbed", out)
	}
}

func TestPreviewChangesDefinition(t *testing.T) {
	a := mustNew(t, []Config{{Name: "a", Exec: &ExecConfig{Command: []string{"true"}}}}, Options{})
	b := mustNew(t, []Config{{Name: "a", Exec: &ExecConfig{Command: []string{"true"}}, Preview: &PreviewConfig{Exec: &ExecConfig{Command: []string{"true"}}}}}, Options{})
	if Definition(mustGet(t, a, "a")) == Definition(mustGet(t, b, "a")) {
		t.Error("a preview added leaves the tool's definition the same: grants would cover it")
	}
	if _, ok := PreviewOf(mustGet(t, a, "a")); ok {
		t.Error("PreviewOf a tool without preview: ok")
	}
}

// A preview's output is returned whole, never cut at the tools' output
// cap (its hash binds a yes), exec and http alike; one longer than
// MaxPreviewOutput fails rather than be bound in part.
func TestPreviewOutputWhole(t *testing.T) {
	long := strings.Repeat("x", DefaultMaxOutput+5000) + "END"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/huge" {
			w.Write([]byte(strings.Repeat("y", MaxPreviewOutput+1)))
			return
		}
		w.Write([]byte(long))
	}))
	defer srv.Close()
	file := t.TempDir() + "/out"
	if err := os.WriteFile(file, []byte(long), 0o600); err != nil {
		t.Fatal(err)
	}
	huge := t.TempDir() + "/huge"
	if err := os.WriteFile(huge, []byte(strings.Repeat("y", MaxPreviewOutput+1)), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]*PreviewConfig{
		"exec": {Exec: &ExecConfig{Command: []string{"cat", file}}},
		"http": {HTTP: &HTTPConfig{Method: "GET", URL: srv.URL + "/long"}},
	} {
		out, err := previewTool(t, p, Options{}).Preview(context.Background(), json.RawMessage(`{}`))
		if err != nil || out != long {
			t.Errorf("%s: Preview = %d bytes, %v; want the whole %d", name, len(out), err, len(long))
		}
	}
	for name, p := range map[string]*PreviewConfig{
		"exec": {Exec: &ExecConfig{Command: []string{"cat", huge}}},
		"http": {HTTP: &HTTPConfig{Method: "GET", URL: srv.URL + "/huge"}},
	} {
		if _, err := previewTool(t, p, Options{}).Preview(context.Background(), json.RawMessage(`{}`)); !errors.Is(err, ErrPreviewTooLarge) {
			t.Errorf("%s: Preview of more than %d bytes = %v, want ErrPreviewTooLarge", name, MaxPreviewOutput, err)
		}
	}
	// The tool's own run is still cut.
	s := mustNew(t, []Config{{Name: "a", Exec: &ExecConfig{Command: []string{"cat", file}}}}, Options{})
	out, err := mustGet(t, s, "a").Run(context.Background(), json.RawMessage(`{}`), "k")
	if err != nil || len(out) > DefaultMaxOutput+100 || !strings.Contains(out, "truncated") {
		t.Errorf("tool run: %d bytes, %v; want it cut", len(out), err)
	}
}
