// Package tools owns the tools Airlock carries: their definitions from
// config, argument validation against a JSON Schema, the read-back summary a
// person approves, and the executors (HTTP and exec) that run them.
package tools

import (
	"context"
	"encoding/json"
	"time"

	"github.com/airlockhq/airlock/model"
)

// Config is one tool as written in the config file (key `tools[]`).
type Config struct {
	Name        string         `yaml:"name"`
	Description string         `yaml:"description"`
	Parameters  map[string]any `yaml:"parameters"` // JSON Schema
	Confirm     bool           `yaml:"confirm"`
	Summary     string         `yaml:"summary"` // text/template over the validated arguments
	HTTP        *HTTPConfig    `yaml:"http"`
	Exec        *ExecConfig    `yaml:"exec"`
}

// HTTPConfig is the `http` executor.
type HTTPConfig struct {
	Method  string            `yaml:"method"`
	URL     string            `yaml:"url"` // text/template over the arguments
	Headers map[string]string `yaml:"headers"`
}

// ExecConfig is the `exec` executor.
type ExecConfig struct {
	Command []string          `yaml:"command"` // argv, each a text/template; no shell
	Timeout time.Duration     `yaml:"timeout"`
	Env     map[string]string `yaml:"env"`
}

// Tool is one tool the bot carries.
type Tool interface {
	Spec() model.ToolSpec
	// Confirm is the tool's own confirm flag.
	Confirm() bool
	// Validate checks arguments against the schema.
	Validate(args json.RawMessage) error
	// Summary renders the read-back from validated arguments only.
	Summary(args json.RawMessage) (string, error)
	// Run executes the tool once. idempotencyKey is "<batch id>/<call key>".
	Run(ctx context.Context, args json.RawMessage, idempotencyKey string) (string, error)
}
