package config

import (
	"errors"
	"testing"
)

// FuzzParse: any bytes give a config or a clear error, never a panic; an
// error that names a key names one.
func FuzzParse(f *testing.F) {
	f.Add([]byte(minimal))
	f.Add([]byte(minimal + "tools:\n  - name: a\n    http: {url: 'http://x/{{.a}}'}\n"))
	f.Add([]byte("model: {provider: openai, name: m}\nconfirmation: {timeout: 90}\n"))
	f.Add([]byte("model: ${X:-}\n"))
	f.Add([]byte("- a\n- b\n"))
	f.Add([]byte("model: {provider: openai, name: m}\nchannels: [{platform: slack, id: '*', approver_groups: [S1]}]\n"))
	f.Add([]byte("&a [*a, *a]"))
	f.Add([]byte("model: {provider: openai, name: m}\nconfirmation: {escalation: [{after: 10m, mention: ['role:1', S1AB], approvers: [U1AB]}]}\nchannels: [{platform: slack, id: C1AB, approvals_channel: C2AB, notify: [dm]}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data, func(string) (string, bool) { return "v", true })
		if err == nil && c == nil {
			t.Fatal("nil config without an error")
		}
		var ke *Error
		if errors.As(err, &ke) && ke.Key == "" && ke.Err == nil {
			t.Fatalf("empty key error: %v", err)
		}
	})
}
