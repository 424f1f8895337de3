package jsonobj

import (
	"bytes"
	"encoding/json"
)

// Canonical is a JSON value as one text whatever its spacing and key
// order (keys sorted, numbers as written, no HTML escaping): two values
// are the same when their canonical texts are equal. ok is false for
// text that is not one JSON value. A runbook retry's arguments, and a
// gateway request binding to an earlier approval, are compared so.
func Canonical(raw []byte) (out []byte, ok bool) {
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

// Same reports whether a and b are the same JSON value (Canonical); text
// that is not JSON is the same as nothing.
func Same(a, b []byte) bool {
	ca, okA := Canonical(a)
	cb, okB := Canonical(b)
	return okA && okB && bytes.Equal(ca, cb)
}
