package model

import "context"

// OffReply is what Off answers every turn with.
const OffReply = "No model is configured (model.api_key is empty), so free text gets no answer. " +
	"Runbooks work without one: /runbooks lists them and /run <name> key=value starts one " +
	"(in Slack or Discord: @airlock runbooks, @airlock run <name> key=value)."

// Off is the provider when no model is configured: it answers every turn
// with OffReply, one line and no tool call, without calling anything.
type Off struct{}

// Generate implements Provider.
func (Off) Generate(context.Context, Request) (Message, error) {
	return Message{Role: RoleAssistant, Text: OffReply}, nil
}
