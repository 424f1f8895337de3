package jsonobj

import (
	"encoding/json"
	"testing"
)

// Fields keep their order; raw JSON stays as it is and anything else
// becomes a string, so hostile bytes cannot break out of their field.
func TestObject(t *testing.T) {
	var o Object
	if got := o.String(); got != "{}" {
		t.Fatalf("empty: %s", got)
	}
	o.Add("z", "first")
	o.AddRaw("a", []byte(`{"k":[1,2]}`))
	o.AddRaw("b", []byte(`"},"evil":true,"x":{`))
	o.AddRaw("c", nil)
	o.Add("d", func() {}) // json.Marshal fails: its error as a string
	want := `{"z":"first","a":{"k":[1,2]},"b":"\"},\"evil\":true,\"x\":{","c":"","d":"json: unsupported type: func()"}`
	if got := o.String(); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(o.String()), &m); err != nil || m["evil"] != nil {
		t.Fatalf("not one valid object: %v %v", err, m)
	}
}
