package bot

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/runbook"
)

// stepCall reports whether c is a runbook step's call: its idempotency
// key is the step's, not <batch id>/<key> (see stepBatch).
func stepCall(c confirm.Call) bool {
	return c.IdempotencyKey != "" && !strings.HasPrefix(c.IdempotencyKey, c.BatchID+"/")
}

// toolArgs are the arguments c's tool receives, args being its
// arguments as stored (the model's, an edit's, a step's): for a runbook
// step, the secrets its configured arguments reference are put in where
// that configuration puts them (runbook.ExpandSecrets), in memory only;
// everything else is args as stored. An error (a secret no longer
// configured) means the tool must not run.
func (b *Bot) toolArgs(ctx context.Context, c confirm.Call, args json.RawMessage) (json.RawMessage, error) {
	if !stepCall(c) {
		return args, nil
	}
	sc, ok, err := b.stepConfigOf(ctx, c.BatchID)
	if err != nil {
		return nil, fmt.Errorf("the step of the call: %w", err)
	}
	if !ok {
		return args, nil
	}
	return runbook.ExpandSecrets(args, sc.SecretPaths(), b.stepSecret)
}

// stepSecret is the value of a step's secret reference, if configured.
func (b *Bot) stepSecret(ref string) (string, bool) {
	if b.cfg.StepSecret == nil {
		return "", false
	}
	return b.cfg.StepSecret(ref)
}

// judgedCall is the call the policy and the tool's schema judge: its
// arguments as they will run, a step's secrets put in (in memory only),
// so a rule over an argument that holds a reference sees its value. The
// call is stored, shown and approved with the references (c itself).
// When a secret is not configured it is c: the tool will not run then.
func (b *Bot) judgedCall(ctx context.Context, call confirm.Call, c confirm.ToolCall) confirm.ToolCall {
	if args, err := b.toolArgs(ctx, call, c.Args); err == nil {
		c.Args = args
	}
	return c
}
