// Package adaptertest holds fakes the adapters' tests share.
package adaptertest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"

	"github.com/airlockhq/airlock/model"
	"github.com/airlockhq/airlock/tools"
)

// ChargeTool is an ungated tool, charge, whose first run's outcome is
// unknown (the connection was reset after the request went out); later
// runs answer "charged". Its summary is "charge <arguments>".
type ChargeTool struct{ Runs atomic.Int64 }

func (c *ChargeTool) Spec() model.ToolSpec {
	return model.ToolSpec{Name: "charge", Description: "Charge a card.", Parameters: json.RawMessage(`{"type":"object"}`)}
}
func (c *ChargeTool) Confirm() bool                  { return false }
func (c *ChargeTool) Validate(json.RawMessage) error { return nil }
func (c *ChargeTool) Summary(args json.RawMessage) (string, error) {
	return "charge " + string(args), nil
}
func (c *ChargeTool) Run(context.Context, json.RawMessage, string) (string, error) {
	if c.Runs.Add(1) == 1 {
		return "", fmt.Errorf("read: connection reset by peer: %w", tools.ErrOutcomeUnknown)
	}
	return "charged", nil
}
