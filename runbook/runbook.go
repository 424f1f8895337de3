// Package runbook owns runbooks: named, parameterised procedures of tool
// calls that on-call engineers start from chat (or the agent starts as a
// tool), whose gated steps wait for a person's yes on the usual cards. It
// holds the definitions as configured and compiled (parameters, steps,
// CEL expressions and argument templates), the parsing of a `run`
// command, and the Engine that advances a run step by step (conditions,
// retries, on_failure steps, halts); each step's call goes through the
// bot's one decision path.
package runbook

import (
	"encoding/json"
	"time"

	"github.com/airlockhq/airlock/confirm"
)

// Outcome is where a step of a run ended (the values of
// steps.<id>.outcome in expressions): the stored status of its attempt,
// one that is not Active.
type Outcome = confirm.StepStatus

const (
	Succeeded = confirm.StepSucceeded
	Failed    = confirm.StepFailed
	Denied    = confirm.StepDenied
	Expired   = confirm.StepExpired
	Skipped   = confirm.StepSkipped
	Unknown   = confirm.StepUnknown
)

// Failure policies of a step (steps[].on_failure).
const (
	OnFailureStop     = "stop" // the default: the run stops, on_failure steps run
	OnFailureContinue = "continue"
)

// Config is one `runbooks[]` entry as the configuration file holds it.
// The yaml key names are a contract.
type Config struct {
	Name        string `yaml:"name"` // [a-z0-9_-]{1,48}, unique
	Description string `yaml:"description"`
	// Parameters is a JSON Schema of an object, validated like tool
	// arguments (decoded from YAML into JSON).
	Parameters map[string]any `yaml:"parameters"`
	Steps      []StepConfig   `yaml:"steps"`
	// OnFailure steps run, in order, when the run stops on a failed step
	// (not for a deny).
	OnFailure []StepConfig `yaml:"on_failure"`
}

// StepConfig is one step of a runbook as configured.
type StepConfig struct {
	ID   string `yaml:"id"`   // [a-z0-9_]{1,32}, unique in the runbook
	Tool string `yaml:"tool"` // any tool Airlock offers
	// Args are the tool's arguments; a string value that is exactly
	// "{{ EXPR }}" takes the CEL expression's typed value, a string with
	// "{{ EXPR }}" inside other text interpolates its string form.
	Args map[string]any `yaml:"args"`
	// When is a CEL condition; false: the step is skipped.
	When string `yaml:"when"`
	// Confirm: the step needs approval whatever the tool says (only adds).
	Confirm bool `yaml:"confirm"`
	// Approvals: at least this many distinct approvers (only adds).
	Approvals int `yaml:"approvals"`
	// Timeout overrides the tool's own (0: the tool's).
	Timeout   time.Duration `yaml:"timeout"`
	Retry     *RetryConfig  `yaml:"retry"`
	OnFailure string        `yaml:"on_failure"` // stop (default) | continue
}

// RetryConfig re-runs a step after a failed outcome (never after unknown).
type RetryConfig struct {
	Attempts int           `yaml:"attempts"` // at least 2
	Delay    time.Duration `yaml:"delay"`
	Until    string        `yaml:"until"` // CEL; the step is done when it holds
}

// Max is how many times the step may run: Attempts, or DefaultAttempts
// when the retry gives until only.
func (r *RetryConfig) Max() int {
	if r == nil {
		return 1
	}
	if r.Attempts == 0 {
		return DefaultAttempts
	}
	return r.Attempts
}

// RunInfo is the `run` variable of expressions.
type RunInfo struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	Requester  string `json:"requester"`
	Platform   string `json:"platform"`
	Channel    string `json:"channel"`
	FailedStep string `json:"failed_step"`
}

// StepState is what expressions see of an earlier step
// (steps.<id>.outcome, steps.<id>.result).
type StepState struct {
	Outcome Outcome `json:"outcome"`
	// Result is the tool's result: decoded JSON when it is JSON, else its
	// text.
	Result any `json:"result"`
}

// Vars are the variables of a run's expressions.
type Vars struct {
	Params map[string]any
	Steps  map[string]StepState
	Run    RunInfo
	Now    time.Time
}

// Snapshot is a runbook's definition as a run stores it when it starts:
// editing the config and restarting does not change the steps of a run in
// progress. It is the Config as JSON.
type Snapshot = json.RawMessage
