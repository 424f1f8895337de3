package confirm

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestQuestionFields(t *testing.T) {
	fields, err := QuestionFields(json.RawMessage(`{"type":"object","properties":{
		"replicas":{"type":"integer","minimum":1,"maximum":10,"title":"Replicas"},
		"env":{"type":"string","enum":["prod","staging"]},
		"note":{"type":"string","maxLength":5},
		"force":{"type":"boolean"},
		"ratio":{"type":"number"}},"required":["env","replicas"]}`))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range fields {
		names = append(names, f.Name)
	}
	if strings.Join(names, " ") != "env force note ratio replicas" || !fields[0].Required || fields[1].Required ||
		len(fields[0].Choices) != 2 || fields[2].MaxLen != 5 || *fields[4].Max != 10 {
		t.Fatalf("fields = %+v", fields)
	}
	for _, bad := range []string{
		`{"type":"object","properties":{"tags":{"type":"array","items":{"type":"string"}}}}`,
		`{"type":"object","properties":{"o":{"type":"object"}}}`,
		`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"},"c":{"type":"string"},"d":{"type":"string"},"e":{"type":"string"},"f":{"type":"string"}}}`,
		`{"type":"string"}`,
		`[1,2]`,
		`{"type":"object","properties":{"n":{"type":"string","enum":[1,2]}}}`,
	} {
		if _, err := QuestionFields(json.RawMessage(bad)); !errors.Is(err, ErrUnsupportedForm) {
			t.Errorf("QuestionFields(%s) = %v, want ErrUnsupportedForm", bad, err)
		}
	}
}

func TestParseAnswer(t *testing.T) {
	one := 1.0
	fields := []QuestionField{
		{Name: "env", Type: FieldString, Choices: []string{"prod", "staging"}, Required: true},
		{Name: "replicas", Title: "Replicas", Type: FieldInteger, Min: &one},
		{Name: "force", Type: FieldBoolean},
		{Name: "note", Type: FieldString, MaxLen: 5},
	}
	got, err := ParseAnswer(fields, []string{" Staging ", "3", "yes", ""})
	if err != nil || got["env"] != "staging" || got["replicas"] != int64(3) || got["force"] != true || len(got) != 3 {
		t.Fatalf("ParseAnswer = %v, %v", got, err)
	}
	for _, tc := range []struct {
		values []string
		names  string
	}{
		{[]string{"", "", "", ""}, "env is required"},
		{[]string{"dev", "", "", ""}, "env must be one of: prod, staging"},
		{[]string{"prod", "2.5", "", ""}, "Replicas must be a whole number"},
		{[]string{"prod", "0", "", ""}, "Replicas must be at least 1"},
		{[]string{"prod", "NaN", "", ""}, "Replicas must be a number"},
		{[]string{"prod", "", "maybe", ""}, "force must be yes or no"},
		{[]string{"prod", "", "", "toolong"}, "note holds at most 5 characters"},
		{[]string{"prod"}, "1 values for 4 fields"},
	} {
		_, err := ParseAnswer(fields, tc.values)
		if !errors.Is(err, ErrBadAnswer) || !strings.Contains(err.Error(), tc.names) {
			t.Errorf("ParseAnswer(%q) = %v, want %q", tc.values, err, tc.names)
		}
	}
}

func TestQuestionRef(t *testing.T) {
	if id, err := ParseQuestionRef(QuestionRef("abc123")); err != nil || id != "abc123" {
		t.Fatalf("round trip = %q, %v", id, err)
	}
	for _, bad := range []string{"", "question-", "question-ABC", GrantRef("abc"), "abc123.0"} {
		if _, err := ParseQuestionRef(bad); !errors.Is(err, ErrBadRef) {
			t.Errorf("ParseQuestionRef(%q) = %v", bad, err)
		}
	}
}
