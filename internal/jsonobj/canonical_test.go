package jsonobj

import "testing"

// The same value in another spacing or key order is the same; another
// number as written, another value, or text that is not JSON is not.
func TestSame(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{`{"b":1,"a":[true,"x"]}`, ` { "a" : [true, "x"], "b": 1 } `, true},
		{`{"a":"<&>"}`, `{"a":"\u003c&\u003e"}`, true},
		{`{"a":1}`, `{"a":1.0}`, false},
		{`{"a":1}`, `{"a":2}`, false},
		{`{"a":1}`, `{"a":1} {}`, false},
		{`nope`, `nope`, false},
	} {
		if got := Same([]byte(tc.a), []byte(tc.b)); got != tc.same {
			t.Errorf("Same(%s, %s) = %v", tc.a, tc.b, got)
		}
	}
}
