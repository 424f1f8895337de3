package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/keyerr"
)

func TestToolPreviewKeys(t *testing.T) {
	tool := `tools:
  - name: status
    exec: {command: ["true"]}
  - name: other
    exec: {command: ["true"]}
  - name: apply_manifest
    confirm: true
    exec: {command: [kubectl, apply, -f, "{{.path}}"]}
    preview:
`
	ok := tool + `      exec: {command: [kubectl, diff, -f, "{{.path}}"], timeout: 30s}
      ok_exit_codes: [0, 1]
      recheck: true
`
	c, err := Parse([]byte(minimal+ok), env(nil))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	p := c.Tools[2].Preview
	if p == nil || p.Exec == nil || len(p.OKExitCodes) != 2 || !p.Recheck {
		t.Fatalf("preview %+v", p)
	}
	for _, tc := range []struct{ src, key string }{
		{tool + "      exec: {command: [kubectl, diff], timeout: 6m}\n", "tools[2].preview.exec.timeout"},
		{tool + "      http: {url: \"http://h/\", timeout: 1h}\n", "tools[2].preview.http.timeout"},
		{tool + "      recheck: true\n", "tools[2].preview"},
		{tool + "      exec: {command: [kubectl]}\n      ok_exit_code: [1]\n", "tools[2].preview.ok_exit_code"},
	} {
		_, err := Parse([]byte(minimal+tc.src), env(nil))
		var ke *keyerr.Error
		if !errors.As(err, &ke) || !strings.HasPrefix(ke.Key, tc.key) {
			t.Errorf("%s: error %v, want one naming %s", tc.key, err, tc.key)
		}
	}
}
