package confirm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Questions. An upstream MCP server may ask, during a call Airlock makes
// (for its own agent, a runbook step or a gateway client), for input in
// form mode (MCP elicitation). Airlock posts the question in the call's
// conversation with a form built from the requested schema; an approver of
// the channel answers (accept with values) or declines; expiry, or the
// call ending first, cancels. The server's words are untrusted: shown
// inert, never deciding who answers. Asking and answering are audited.

// Elicitation is a server's question as the MCP client hands it on: which
// server and tool (Airlock's name) asked during which call (its
// idempotency key), the message and the requested schema, as sent.
type Elicitation struct {
	Server         string
	Tool           string
	IdempotencyKey string
	Message        string
	Schema         json.RawMessage
}

// The actions of an answer, as MCP names them.
const (
	ElicitAccept  = "accept"
	ElicitDecline = "decline"
	ElicitCancel  = "cancel"
)

// ElicitAnswer is what the server is sent: accept with Content, decline or
// cancel.
type ElicitAnswer struct {
	Action  string
	Content map[string]any
}

// QuestionStatus is where a question stands.
type QuestionStatus string

const (
	QuestionPending   QuestionStatus = "pending"
	QuestionAccepted  QuestionStatus = "accepted"  // answered with values
	QuestionDeclined  QuestionStatus = "declined"  // a person declined
	QuestionCancelled QuestionStatus = "cancelled" // expired, or the call ended first
)

// Action is the MCP action the status answers with.
func (s QuestionStatus) Action() string {
	switch s {
	case QuestionAccepted:
		return ElicitAccept
	case QuestionDeclined:
		return ElicitDecline
	}
	return ElicitCancel
}

// The audit events of questions.
const (
	AuditQuestionAsked    AuditKind = "question_asked"    // detail: server, message, fields
	AuditQuestionAnswered AuditKind = "question_answered" // detail: status, answer (accepted), why (cancelled)
)

// Field types a question's form holds.
const (
	FieldString  = "string"
	FieldNumber  = "number"
	FieldInteger = "integer"
	FieldBoolean = "boolean"
)

// MaxQuestionFields is how many fields a question's form holds: a Discord
// modal's five inputs. A schema asking more is declined, saying so.
const MaxQuestionFields = 5

// MaxFieldChars caps one typed value, in runes.
const MaxFieldChars = 1000

// QuestionField is one input of a question's form, from one property of
// the requested schema. Title and Description are the server's
// (untrusted).
type QuestionField struct {
	Name        string   `json:"name"`
	Type        string   `json:"type"`
	Title       string   `json:"title,omitempty"`
	Description string   `json:"description,omitempty"`
	Required    bool     `json:"required,omitempty"`
	Choices     []string `json:"choices,omitempty"` // a string enum's values
	MinLen      int      `json:"min_len,omitempty"`
	MaxLen      int      `json:"max_len,omitempty"`
	Min         *float64 `json:"min,omitempty"`
	Max         *float64 `json:"max,omitempty"`
}

// Question is a server's question as stored.
type Question struct {
	ID             string
	ConversationID int64
	BatchID        string // the call's batch
	CallKey        string
	Server         string
	Tool           string
	Message        string
	Fields         []QuestionField
	Status         QuestionStatus
	Answer         map[string]any // the accepted values
	By             string         // who answered or declined; "airlock" for a cancel
	Why            string         // a cancel's reason, in words
	NoticeRef      string
	CreatedAt      time.Time
	ExpiresAt      time.Time
	EndedAt        *time.Time
}

// ErrUnsupportedForm wraps why a requested schema cannot be shown as a
// form (nested objects, arrays, too many fields): the question is declined.
var ErrUnsupportedForm = errors.New("the requested form cannot be shown")

// ErrBadAnswer is why a submitted answer is refused (an *AnswerError is
// one): nothing changes and the person may submit again.
var ErrBadAnswer = errors.New("the answer does not fit the form")

// AnswerError says which field of a submitted answer does not fit, and
// why, in words naming it (Field -1: the form as a whole).
type AnswerError struct {
	Field   int
	Message string
}

func (e *AnswerError) Error() string { return e.Message }

// Is makes an AnswerError an ErrBadAnswer.
func (e *AnswerError) Is(target error) bool { return target == ErrBadAnswer }

// wireSchema is the part of a requested schema Airlock reads.
type wireSchema struct {
	Type       string                     `json:"type"`
	Properties map[string]json.RawMessage `json:"properties"`
	Required   []string                   `json:"required"`
}

type wireProp struct {
	Type        string   `json:"type"`
	Title       string   `json:"title"`
	Description string   `json:"description"`
	Enum        []any    `json:"enum"`
	MinLength   *int     `json:"minLength"`
	MaxLength   *int     `json:"maxLength"`
	Minimum     *float64 `json:"minimum"`
	Maximum     *float64 `json:"maximum"`
}

// QuestionFields builds a form's fields from a requested schema: a flat
// object whose properties are strings (a string enum is a choice),
// numbers, integers or booleans, at most MaxQuestionFields of them, in
// the order of their names. Anything else wraps ErrUnsupportedForm,
// naming the property.
func QuestionFields(schema json.RawMessage) ([]QuestionField, error) {
	var s wireSchema
	if len(schema) == 0 || string(schema) == "null" {
		return nil, nil
	}
	if err := json.Unmarshal(schema, &s); err != nil {
		return nil, fmt.Errorf("%w: the schema is not an object: %v", ErrUnsupportedForm, err)
	}
	if s.Type != "" && s.Type != "object" {
		return nil, fmt.Errorf("%w: the schema is of type %q, not an object", ErrUnsupportedForm, s.Type)
	}
	if len(s.Properties) > MaxQuestionFields {
		return nil, fmt.Errorf("%w: it asks for %d fields; a form holds %d", ErrUnsupportedForm, len(s.Properties), MaxQuestionFields)
	}
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	slices.Sort(names)
	out := make([]QuestionField, 0, len(names))
	for _, n := range names {
		var p wireProp
		if err := json.Unmarshal(s.Properties[n], &p); err != nil {
			return nil, fmt.Errorf("%w: field %q is not a schema", ErrUnsupportedForm, clipWords(n))
		}
		f := QuestionField{Name: n, Type: p.Type, Title: p.Title, Description: p.Description,
			Required: slices.Contains(s.Required, n), Min: p.Minimum, Max: p.Maximum}
		switch p.Type {
		case FieldString:
			for _, e := range p.Enum {
				v, ok := e.(string)
				if !ok {
					return nil, fmt.Errorf("%w: field %q has a choice that is not text", ErrUnsupportedForm, clipWords(n))
				}
				f.Choices = append(f.Choices, v)
			}
			if p.MinLength != nil {
				f.MinLen = *p.MinLength
			}
			if p.MaxLength != nil {
				f.MaxLen = *p.MaxLength
			}
		case FieldNumber, FieldInteger, FieldBoolean:
		default:
			return nil, fmt.Errorf("%w: field %q is of type %q; a form holds text, a number, yes or no, or one choice",
				ErrUnsupportedForm, clipWords(n), clipWords(p.Type))
		}
		out = append(out, f)
	}
	return out, nil
}

// clipWords bounds a server's name in an error (it is shown quoted).
func clipWords(s string) string {
	if utf8.RuneCountInString(s) <= 60 {
		return s
	}
	return string([]rune(s)[:60]) + "…"
}

// ParseAnswer reads the values typed in a question's form, one per field
// in order: an empty value leaves an optional field out; a number, an
// integer, yes or no (true, false) and a choice must be one. Whatever does
// not fit is an *AnswerError naming the field.
func ParseAnswer(fields []QuestionField, values []string) (map[string]any, error) {
	if len(values) != len(fields) {
		return nil, &AnswerError{Field: -1, Message: fmt.Sprintf("%d values for %d fields", len(values), len(fields))}
	}
	out := make(map[string]any, len(fields))
	bad := func(i int, format string, args ...any) error {
		return &AnswerError{Field: i, Message: fmt.Sprintf(format, args...)}
	}
	for i, f := range fields {
		v := strings.TrimSpace(values[i])
		name := f.Label()
		if v == "" {
			if f.Required {
				return nil, bad(i, "%s is required", name)
			}
			continue
		}
		if utf8.RuneCountInString(v) > MaxFieldChars {
			return nil, bad(i, "%s is longer than %d characters", name, MaxFieldChars)
		}
		switch f.Type {
		case FieldString:
			if len(f.Choices) > 0 {
				j := slices.IndexFunc(f.Choices, func(c string) bool { return strings.EqualFold(c, v) })
				if j < 0 {
					return nil, bad(i, "%s must be one of: %s", name, strings.Join(f.Choices, ", "))
				}
				out[f.Name] = f.Choices[j]
				continue
			}
			n := utf8.RuneCountInString(v)
			if f.MinLen > 0 && n < f.MinLen {
				return nil, bad(i, "%s needs at least %d characters", name, f.MinLen)
			}
			if f.MaxLen > 0 && n > f.MaxLen {
				return nil, bad(i, "%s holds at most %d characters", name, f.MaxLen)
			}
			out[f.Name] = v
		case FieldNumber, FieldInteger:
			x, err := strconv.ParseFloat(v, 64)
			if err != nil || math.IsInf(x, 0) || math.IsNaN(x) {
				return nil, bad(i, "%s must be a number", name)
			}
			if f.Type == FieldInteger && x != math.Trunc(x) {
				return nil, bad(i, "%s must be a whole number", name)
			}
			if f.Min != nil && x < *f.Min {
				return nil, bad(i, "%s must be at least %s", name, formatNumber(*f.Min))
			}
			if f.Max != nil && x > *f.Max {
				return nil, bad(i, "%s must be at most %s", name, formatNumber(*f.Max))
			}
			if f.Type == FieldInteger {
				out[f.Name] = int64(x)
			} else {
				out[f.Name] = x
			}
		case FieldBoolean:
			switch strings.ToLower(v) {
			case "yes", "y", "true":
				out[f.Name] = true
			case "no", "n", "false":
				out[f.Name] = false
			default:
				return nil, bad(i, "%s must be yes or no", name)
			}
		default:
			return nil, bad(i, "%s is of a type a form does not hold", name)
		}
	}
	return out, nil
}

// Label is the field's name as a person reads it: its title, else its name.
func (f QuestionField) Label() string {
	if t := strings.TrimSpace(f.Title); t != "" {
		return clipWords(t)
	}
	return clipWords(f.Name)
}

func formatNumber(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }

// questionRefPrefix starts the reference of a question's buttons.
const questionRefPrefix = "question-"

// QuestionRef is the opaque reference of a question's buttons (Answer…,
// Decline).
func QuestionRef(id string) string { return questionRefPrefix + id }

// ParseQuestionRef returns the question id of a reference made by
// QuestionRef.
func ParseQuestionRef(ref string) (string, error) { return prefixedID(ref, questionRefPrefix) }

// QuestionStore keeps questions.
type QuestionStore interface {
	// CreateQuestion stores q pending, created now and expiring after
	// ttl, and audits question_asked, in one transaction; q.ID is set.
	CreateQuestion(ctx context.Context, q Question, ttl time.Duration) (Question, error)
	Question(ctx context.Context, id string) (Question, error)
	// EndQuestion ends a pending question with status (accepted with
	// answer, declined, cancelled with why) by one conditional UPDATE and
	// audits question_answered; false, and nothing written, when it was
	// not pending, or (accepted, declined) had expired.
	EndQuestion(ctx context.Context, id string, status QuestionStatus, answer map[string]any, by, why string) (bool, error)
	SetQuestionNoticeRef(ctx context.Context, id, ref string) error
	// ExpiredQuestions lists up to limit pending questions past their
	// expiry, oldest first.
	ExpiredQuestions(ctx context.Context, limit int) ([]Question, error)
}
