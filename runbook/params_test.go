package runbook

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

const paramsExample = `
- name: p
  parameters:
    type: object
    properties:
      service: {type: string, enum: [api, web, worker]}
      environment: {type: string, enum: [staging, production], default: staging}
      count: {type: integer, minimum: 1, default: 1}
      ratio: {type: number}
      force: {type: boolean}
      hosts: {type: array, items: {type: string}}
    required: [service]
    additionalProperties: false
  steps:
    - {id: s, tool: t}
`

func TestParamsCoerceDefaultsValidate(t *testing.T) {
	r := mustCompile(t, paramsExample)
	got, err := r.Params(map[string]string{"service": "api", "count": "3", "ratio": "0.5", "force": "true", "hosts": `["a","b"]`})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"service": "api", "environment": "staging", "count": int64(3), "ratio": 0.5, "force": true, "hosts": []any{"a", "b"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v", got)
	}
	got, err = r.Params(map[string]string{"service": "web"})
	if err != nil || got["count"] != int64(1) || got["environment"] != "staging" {
		t.Fatalf("defaults: %#v %v", got, err)
	}
}

func TestParamsErrorsNameTheParameterAndWhatIsAllowed(t *testing.T) {
	r := mustCompile(t, paramsExample)
	for _, tc := range []struct {
		given   map[string]string
		param   string
		allowed string
		msg     string
	}{
		{map[string]string{}, "service", "api,web,worker", "parameter service: required (allowed: api, web, worker)"},
		{map[string]string{"service": "db"}, "service", "api,web,worker", `parameter service: "db" is not allowed (allowed: api, web, worker)`},
		{map[string]string{"service": "api", "environment": "prod"}, "environment", "staging,production", `"prod" is not allowed`},
		{map[string]string{"service": "api", "count": "two"}, "count", "", `parameter count: "two" is not an integer`},
		{map[string]string{"service": "api", "count": "0"}, "count", "", "minimum"},
		{map[string]string{"service": "api", "force": "yes"}, "force", "", "a boolean (true or false)"},
		{map[string]string{"service": "api", "hosts": "a,b"}, "hosts", "", "an array written as JSON"},
		{map[string]string{"service": "api", "hosts": "[1]"}, "hosts", "", "string"},
		{map[string]string{"service": "api", "colour": "red"}, "colour", "count,environment,force,hosts,ratio,service", "no such parameter"},
	} {
		_, err := r.Params(tc.given)
		var pe *ParamError
		if !errors.As(err, &pe) || pe.Param != tc.param || strings.Join(pe.Allowed, ",") != tc.allowed || !strings.Contains(err.Error(), tc.msg) || !errors.Is(err, ErrInvalidParams) {
			t.Errorf("%v: got %v (%+v)", tc.given, err, pe)
		}
	}
}

func TestParamsJSON(t *testing.T) {
	r := mustCompile(t, paramsExample)
	got, err := r.ParamsJSON(json.RawMessage(`{"service":"worker","count":2}`))
	if err != nil || got["count"] != int64(2) || got["environment"] != "staging" {
		t.Fatalf("%#v %v", got, err)
	}
	for raw, want := range map[string]string{
		`{"service":"worker","service":"api"}`: "not one JSON object",
		`[1]`:                                  "not one JSON object",
		`{"service":"db"}`:                     "parameter service",
		`{"service":"api","count":"2"}`:        "parameter count",
		`{"service":"api","x":1}`:              "parameter x: no such parameter",
		``:                                     "parameter service: required",
	} {
		_, err := r.ParamsJSON(json.RawMessage(raw))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", raw, err)
		}
	}
}

func TestParamSpecs(t *testing.T) {
	r := mustCompile(t, paramsExample)
	specs := r.ParamSpecs()
	if specs[0].Name != "service" || !specs[0].Required || len(specs[0].Enum) != 3 {
		t.Fatalf("%+v", specs[0])
	}
	for _, s := range specs {
		if s.Name == "count" && (!s.HasDefault || s.Default != int64(1) || s.Type != "integer") {
			t.Fatalf("%+v", s)
		}
	}
	if string(r.Parameters()) == "" || !json.Valid(r.Parameters()) {
		t.Fatal("Parameters")
	}
}
