package rules

import (
	"context"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"

	"github.com/airlockhq/airlock/confirm"
)

// MayAsk reports whether some call of the tool r.Call.Name, asked at
// r.Platform and r.Channel, could be made to wait for a person by an ask
// rule: whether, with the tool, platform and channel known and the
// arguments, the requester and the time unknown, some ask rule's
// expression is not false. With neither a platform nor a channel given,
// both are unknown too: may a rule ask anywhere. A rule that cannot be evaluated so counts as
// one that may ask (its evaluation errors ask too). Deny rules refuse
// rather than ask and are not counted. A nil Set never asks.
func (s *Set) MayAsk(r confirm.Request) bool {
	if s == nil {
		return false
	}
	known := map[string]any{"tool": r.Call.Name}
	unknown := []*cel.AttributePatternType{cel.AttributePattern("args"), cel.AttributePattern("user"), cel.AttributePattern("client"), cel.AttributePattern("now")}
	if r.Platform == "" && r.Channel == "" { // anywhere (airlock tools)
		unknown = append(unknown, cel.AttributePattern("platform"), cel.AttributePattern("channel"))
	} else {
		known["platform"], known["channel"] = r.Platform, r.Channel
	}
	vars, err := cel.PartialVars(known, unknown...)
	if err != nil {
		return true
	}
	for _, ru := range s.rules {
		if ru.deny {
			continue
		}
		if ru.mayMatch(vars) {
			return true
		}
	}
	return false
}

// mayMatch is whether the rule's expression, partially evaluated, is not
// false.
func (ru *rule) mayMatch(vars any) (may bool) {
	defer func() {
		if recover() != nil {
			may = true
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), EvalTimeout)
	defer cancel()
	out, _, err := ru.partial.ContextEval(ctx, vars)
	if err != nil {
		return true
	}
	if types.IsUnknown(out) {
		return true
	}
	b, ok := out.(types.Bool)
	return !ok || bool(b)
}
