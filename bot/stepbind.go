package bot

import (
	"bytes"
	"encoding/json"
)

// canonicalJSON is a JSON value as one text whatever its spacing and key
// order (keys sorted, numbers as written, no HTML escaping): two
// arguments are the same when their canonical texts are equal. ok is
// false for text that is not one JSON value.
func canonicalJSON(raw []byte) (out []byte, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return nil, false
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, false
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), true
}

// sameArgs reports whether a and b are the same arguments (canonicalJSON).
func sameArgs(a, b []byte) bool {
	ca, okA := canonicalJSON(a)
	cb, okB := canonicalJSON(b)
	return okA && okB && bytes.Equal(ca, cb)
}
