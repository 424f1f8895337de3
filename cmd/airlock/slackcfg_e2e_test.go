package main

import (
	"fmt"
	"strings"
)

// slackRunYAML is the model and slack lines of a test config: the fake
// model at modelURL and the fake Slack Web API at apiURL, in HTTP mode with
// replicaSecret as the signing secret.
func slackRunYAML(modelURL, apiURL string) string {
	return fmt.Sprintf(`model: {provider: openai, name: fake, api_key: sk-test, base_url: %q}
slack: {mode: http, bot_token: xoxb-test, signing_secret: %q, api_url: %q}`, modelURL, replicaSecret, apiURL)
}

// slackRunHead is the start of an `airlock run` config in Slack HTTP
// mode: where it listens, its database, the model and Slack at the fakes,
// and no turn limit.
func slackRunHead(addr, driver, dsn, modelURL, apiURL string) string {
	return fmt.Sprintf("listen: %s\nstorage: {driver: %s, dsn: %q}\n%s\nlimits: {turns_per_minute: 0}", addr, driver, dsn, slackRunYAML(modelURL, apiURL))
}

// deployToolYAML is the tools entry of the deploy tool that needs a yes,
// with the string parameters params (all required), posting to the tool
// server at toolsURL.
func deployToolYAML(toolsURL string, params ...string) string {
	props := make([]string, len(params))
	for i, p := range params {
		props[i] = p + ": {type: string}"
	}
	return fmt.Sprintf(`  - name: deploy
    confirm: true
    parameters: {type: object, properties: {%s}, required: [%s]}
    http: {method: POST, url: "%s/deploy/{{.service}}"}`, strings.Join(props, ", "), strings.Join(params, ", "), toolsURL)
}
