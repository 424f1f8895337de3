// Package jsonobj builds a JSON object field by field, in the order the
// fields are added: the audit's detail column and the webhook payload
// keep their keys in a fixed order that a reader can rely on.
package jsonobj

import "encoding/json"

// Object is a JSON object being built; its zero value is empty.
type Object struct{ b []byte }

// Add appends a field whose value json.Marshal renders (the error's text
// as a string when it cannot).
func (o *Object) Add(key string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(err.Error())
	}
	o.field(key, b)
}

// AddRaw appends a field holding raw verbatim when it is valid JSON, and
// as a JSON string otherwise.
func (o *Object) AddRaw(key string, raw []byte) {
	if len(raw) > 0 && json.Valid(raw) {
		o.field(key, raw)
		return
	}
	o.Add(key, string(raw))
}

func (o *Object) field(key string, value []byte) {
	if len(o.b) == 0 {
		o.b = append(o.b, '{')
	} else {
		o.b = append(o.b, ',')
	}
	k, _ := json.Marshal(key)
	o.b = append(o.b, k...)
	o.b = append(o.b, ':')
	o.b = append(o.b, value...)
}

// String is the object's JSON text ("{}" when no field was added).
func (o *Object) String() string {
	if len(o.b) == 0 {
		return "{}"
	}
	return string(o.b) + "}"
}
