// Package config owns Airlock's configuration file: the typed struct, ${ENV}
// expansion, strict decoding that rejects unknown keys, defaults, and
// validation errors that name the offending key.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/events"
	"github.com/airlockhq/airlock/gateway"
	"github.com/airlockhq/airlock/keyerr"
	"github.com/airlockhq/airlock/mcptools"
	"github.com/airlockhq/airlock/rules"
	"github.com/airlockhq/airlock/runbook"
	"github.com/airlockhq/airlock/telemetry"
	"github.com/airlockhq/airlock/tools"
	"github.com/airlockhq/airlock/web"
)

// Config is the whole configuration file. The yaml key names are a contract:
// other tools write such files.
type Config struct {
	Listen       string            `yaml:"listen"`
	Storage      Storage           `yaml:"storage"`
	Model        Model             `yaml:"model"`
	Confirmation Confirmation      `yaml:"confirmation"`
	Tools        []tools.Config    `yaml:"tools"`
	MCPServers   []mcptools.Config `yaml:"mcp_servers"`
	Channels     []Channel         `yaml:"channels"`
	Limits       Limits            `yaml:"limits"`
	Log          Log               `yaml:"log"`
	Events       events.Config     `yaml:"events"`
	Telemetry    telemetry.Config  `yaml:"telemetry"`
	Debug        Debug             `yaml:"debug"`
	Audit        Audit             `yaml:"audit"`
	// Gateway lists the agents outside Airlock that may ask for approval
	// over HTTP (issue 36; the API is not built yet).
	Gateway gateway.Config `yaml:"gateway"`
	// Web is the signed-in web console (issue 38); off without a
	// base_url.
	Web web.Config `yaml:"web"`
	// ShutdownTimeout is how long `airlock run` lets started work (tool
	// runs) finish after SIGTERM; default 30s.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	Slack           *Slack        `yaml:"slack"`
	Discord         *Discord      `yaml:"discord"`

	// Runbooks are named, parameterised procedures of tool calls.
	Runbooks []runbook.Config `yaml:"runbooks"`

	// secrets are the values that came into the file through ${NAME} or
	// ${NAME:-default}: tokens, keys, header values. They are scrubbed
	// from everything Airlock writes or says.
	secrets []string
	// stepSecrets maps the references a runbook step's args keep (a
	// secret is never put into them) to their values (StepSecret).
	stepSecrets map[string]string

	runbooks []*runbook.Runbook // compiled (Parse)
}

// RunbookSet is the compiled runbooks, in the configuration's order (set
// by Parse). Their MCP servers' tools are checked once the servers listed
// them (runbook.CheckTools).
func (c *Config) RunbookSet() []*runbook.Runbook {
	return append([]*runbook.Runbook(nil), c.runbooks...)
}

// Runbook is the compiled runbook of that name, or nil.
func (c *Config) Runbook(name string) *runbook.Runbook {
	for _, r := range c.runbooks {
		if r.Name() == name {
			return r
		}
	}
	return nil
}

// Secrets returns the values that came into the config through ${NAME}
// or ${NAME:-default}, for redaction.
func (c *Config) Secrets() []string { return c.secrets }

// StepSecret is the value of a secret reference (${NAME},
// ${NAME:-default}, ${file:PATH}) a runbook step's args keep as text:
// the bot puts it in, in memory, when the step's tool runs
// (runbook.ExpandSecrets). ok is false for a reference the file does not
// hold there.
func (c *Config) StepSecret(ref string) (value string, ok bool) {
	value, ok = c.stepSecrets[ref]
	return value, ok
}

// Debug is the `debug` section.
type Debug struct {
	// Pprof serves /debug/pprof/ on `listen`; off by default (it shows
	// the process's internals to whoever reaches the port).
	Pprof bool `yaml:"pprof"`
}

// Log is the `log` section.
type Log struct {
	Format string `yaml:"format"` // text (default) | json
	Level  string `yaml:"level"`  // debug | info (default) | warn | error
}

// Validate checks the section (defaults applied); key is its name, "log".
func (l Log) Validate(key string) error {
	if l.Format != "text" && l.Format != "json" {
		return keyerr.New(key+".format", "%q is not one of text, json", l.Format)
	}
	if !slices.Contains([]string{"debug", "info", "warn", "error"}, l.Level) {
		return keyerr.New(key+".level", "%q is not one of debug, info, warn, error", l.Level)
	}
	return nil
}

// Limits is the `limits` section: guards against floods. 0 disables a limit.
type Limits struct {
	TurnsPerMinute    *int `yaml:"turns_per_minute"`    // per user; default 6
	PendingPerChannel *int `yaml:"pending_per_channel"` // waiting cards per channel; default 20
}

// Turns is the per-user turn limit per minute, with its default; 0: none.
func (l Limits) Turns() int { return intOr(l.TurnsPerMinute, DefaultTurnsPerMinute) }

// Pending is the limit of waiting cards per channel, with its default; 0: none.
func (l Limits) Pending() int { return intOr(l.PendingPerChannel, DefaultPendingPerChannel) }

// Validate checks the section; key is its name, "limits".
func (l Limits) Validate(key string) error {
	if l.Turns() < 0 {
		return keyerr.New(key+".turns_per_minute", "must not be negative (0 disables the limit)")
	}
	if l.Pending() < 0 {
		return keyerr.New(key+".pending_per_channel", "must not be negative (0 disables the limit)")
	}
	return nil
}

func intOr(p *int, def int) int {
	if p == nil {
		return def
	}
	return *p
}

// Slack is the `slack` section; present means `airlock run` connects to Slack.
type Slack struct {
	Mode          string `yaml:"mode"`           // socket (default) | http
	BotToken      string `yaml:"bot_token"`      // xoxb-...
	AppToken      string `yaml:"app_token"`      // xapp-..., socket mode
	SigningSecret string `yaml:"signing_secret"` // http mode
	APIURL        string `yaml:"api_url"`        // Web API base; default https://slack.com/api/
}

// Validate checks the section (defaults applied), if present; key is its
// name, "slack".
func (s *Slack) Validate(key string) error {
	if s == nil {
		return nil
	}
	if s.BotToken == "" {
		return keyerr.New(key+".bot_token", "required (xoxb-...)")
	}
	switch s.Mode {
	case "socket":
		if s.AppToken == "" {
			return keyerr.New(key+".app_token", "required in socket mode (xapp-...)")
		}
	case "http":
		if s.SigningSecret == "" {
			return keyerr.New(key+".signing_secret", "required in http mode")
		}
	default:
		return keyerr.New(key+".mode", "%q is not one of socket, http", s.Mode)
	}
	return validateHTTPURL(key+".api_url", s.APIURL)
}

// validateHTTPURL checks that a set URL is http:// or https://.
func validateHTTPURL(key, u string) error {
	if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		return keyerr.New(key, "must be an http:// or https:// URL")
	}
	return nil
}

// Discord is the `discord` section; present means `airlock run` connects
// to Discord.
type Discord struct {
	Token           string   `yaml:"token"`            // the bare bot token, without "Bot "
	APIURL          string   `yaml:"api_url"`          // REST base; default https://discord.com/api/v9/
	ModerationTools []string `yaml:"moderation_tools"` // built-in tools to enable: timeout_member, kick_member, ban_member, delete_message
}

// DiscordModerationTools are the built-in moderation tools.
var DiscordModerationTools = []string{"timeout_member", "kick_member", "ban_member", "delete_message"}

// Validate checks the section (defaults applied), if present; key is its
// name, "discord".
func (d *Discord) Validate(key string) error {
	if d == nil {
		return nil
	}
	if d.Token == "" {
		return keyerr.New(key+".token", "required")
	}
	if strings.HasPrefix(d.Token, "Bot ") {
		return keyerr.New(key+".token", `write the bare token, without the "Bot " prefix`)
	}
	if err := validateHTTPURL(key+".api_url", d.APIURL); err != nil {
		return err
	}
	for i, n := range d.ModerationTools {
		if !slices.Contains(DiscordModerationTools, n) {
			return keyerr.New(fmt.Sprintf("%s.moderation_tools[%d]", key, i), "%q is not one of %s", n, strings.Join(DiscordModerationTools, ", "))
		}
	}
	return nil
}

// Storage is the `storage` section.
type Storage struct {
	Driver string `yaml:"driver"` // sqlite | postgres
	DSN    string `yaml:"dsn"`
}

// Validate checks the section (defaults applied); key is its name,
// "storage".
func (s Storage) Validate(key string) error {
	switch s.Driver {
	case "sqlite":
	case "postgres":
		if s.DSN == "" {
			return keyerr.New(key+".dsn", "required for the postgres driver")
		}
	default:
		return keyerr.New(key+".driver", "%q is not one of sqlite, postgres", s.Driver)
	}
	return nil
}

// Model is the `model` section.
type Model struct {
	Provider      string `yaml:"provider"` // gemini | openai
	Name          string `yaml:"name"`
	APIKey        string `yaml:"api_key"`
	BaseURL       string `yaml:"base_url"`
	SystemPrompt  string `yaml:"system_prompt"`
	MaxToolRounds int    `yaml:"max_tool_rounds"`
	// MaxCallsPerReply bounds the tool calls of one model reply; a reply
	// with more is answered whole as invalid, nothing run; default 32.
	MaxCallsPerReply int `yaml:"max_calls_per_reply"`
	// MaxHistoryMessages bounds the messages of a thread sent to the
	// model (the oldest drop first); default 100.
	MaxHistoryMessages int `yaml:"max_history_messages"`
	// MaxMessageChars cuts a longer message, with a note; default 8000.
	MaxMessageChars int `yaml:"max_message_chars"`
}

// Off reports whether no model is configured: provider gemini with an
// empty api_key (as config.example.yaml's ${GEMINI_API_KEY:-} gives
// without the variable). Free text is then answered with a line saying
// so; runbooks still work. (An openai provider may need no key: a local
// server.)
func (m Model) Off() bool { return m.Provider == "gemini" && m.APIKey == "" }

// Validate checks the section (defaults applied); key is its name, "model".
func (m Model) Validate(key string) error {
	switch m.Provider {
	case "gemini", "openai":
	case "":
		return keyerr.New(key+".provider", "required: gemini or openai")
	default:
		return keyerr.New(key+".provider", "%q is not one of gemini, openai", m.Provider)
	}
	if m.Name == "" {
		return keyerr.New(key+".name", "required")
	}
	if m.BaseURL != "" {
		if err := validateHTTPURL(key+".base_url", m.BaseURL); err != nil {
			return err
		}
	}
	switch {
	case m.MaxToolRounds < 0:
		return keyerr.New(key+".max_tool_rounds", "must be positive")
	case m.MaxCallsPerReply < 0:
		return keyerr.New(key+".max_calls_per_reply", "must be positive")
	case m.MaxHistoryMessages < 2:
		return keyerr.New(key+".max_history_messages", "must be at least 2")
	case m.MaxMessageChars < 100:
		return keyerr.New(key+".max_message_chars", "must be at least 100")
	}
	return nil
}

// Confirmation is the `confirmation` section.
type Confirmation struct {
	// Enabled honours the tools' confirm flag; false stops honouring the
	// flag only (names in Tools still apply). Default true.
	Enabled *bool         `yaml:"enabled"`
	Tools   []string      `yaml:"tools"`
	Timeout time.Duration `yaml:"timeout"` // default 30m
	// RemindBefore posts a reminder mentioning the approvers this long
	// before expiry; default 5m, 0 disables, one not shorter than the
	// timeout sends none.
	RemindBefore *time.Duration `yaml:"remind_before"`
	// Approvals is how many distinct people must allow a gated call when
	// neither its tool nor a rule says; default 1.
	Approvals int `yaml:"approvals"`
	// SelfApproval lets requesters allow their own calls; default false.
	SelfApproval bool `yaml:"self_approval"`
	// Grants are "Allow for <duration>" buttons.
	Grants Grants `yaml:"grants"`
	// Rules judge calls by their arguments, where and who (CEL).
	Rules []rules.Config `yaml:"rules"`
	// Escalation are the steps taken while a card waits: at each step's
	// After (since the pause) its people are mentioned where the card is,
	// and the card's approvers widen as the step says.
	Escalation []EscalationStep `yaml:"escalation"`
	// StepUp names, by risk tier, what an allow of its calls needs:
	// passkey, sso (a fresh sign-in on the web console) or chat (default).
	StepUp map[string]string `yaml:"step_up"`

	compiled *rules.Set
}

func validTier(t string) bool { r, err := confirm.ParseRisk(t); return err == nil && r != "" }

// StepUpSet is StepUp as the core reads it.
func (c Confirmation) StepUpSet() confirm.StepUp {
	out := confirm.StepUp{}
	for tier, a := range c.StepUp {
		out[confirm.Risk(tier)] = confirm.Assurance(a)
	}
	return out
}

// EscalationStep is one `confirmation.escalation[]` step.
type EscalationStep struct {
	// After is the time since the pause when the step fires; steps are
	// strictly increasing and shorter than confirmation.timeout.
	After time.Duration `yaml:"after"`
	// Mention lists who the step mentions: Slack user ids (U…, W…), Slack
	// user group ids (S…), Discord user ids (digits) and Discord role ids
	// written "role:<id>". See MentionSet.
	Mention []string `yaml:"mention"`
	// Approvers, ApproverGroups and ApproverRoles widen who may decide the
	// card once the step fired: user ids (Slack U…/W…, Discord digits),
	// Slack user group ids (S…), Discord role ids (digits).
	Approvers      []string `yaml:"approvers"`
	ApproverGroups []string `yaml:"approver_groups"`
	ApproverRoles  []string `yaml:"approver_roles"`
}

// MentionRolePrefix marks a Discord role id in an escalation step's
// mention list: "role:222222222222222222".
const MentionRolePrefix = "role:"

// MaxEscalationSteps bounds confirmation.escalation.
const MaxEscalationSteps = 10

// MentionSet is the step's mention list as sets: user ids (Slack and
// Discord) in Users, Slack user group ids in Groups, Discord role ids
// (without "role:") in Roles. Ids of both platforms may be mixed in one
// step; a platform uses the ids of its own form.
func (s EscalationStep) MentionSet() confirm.Approvers {
	var a confirm.Approvers
	for _, m := range s.Mention {
		switch {
		case strings.HasPrefix(m, MentionRolePrefix):
			a.Roles = append(a.Roles, strings.TrimPrefix(m, MentionRolePrefix))
		case slackGroupID.MatchString(m):
			a.Groups = append(a.Groups, m)
		default:
			a.Users = append(a.Users, m)
		}
	}
	return a
}

// ApproverSet is who the step adds to the card's approvers once it fired.
func (s EscalationStep) ApproverSet() confirm.Approvers {
	return confirm.Approvers{Users: s.Approvers, Groups: s.ApproverGroups, Roles: s.ApproverRoles}
}

// RuleSet is the compiled rules (set by Parse).
func (c Confirmation) RuleSet() *rules.Set { return c.compiled }

// Grants is the `confirmation.grants` section.
type Grants struct {
	Enabled  *bool         `yaml:"enabled"`  // default true
	Duration time.Duration `yaml:"duration"` // default 1h, at most 24h
}

// For is how long a grant lasts; 0 when grants are off.
func (g Grants) For() time.Duration {
	if g.Enabled != nil && !*g.Enabled {
		return 0
	}
	if g.Duration == 0 {
		return DefaultGrantDuration
	}
	return g.Duration
}

// Reminder is the reminder lead, with its default.
func (c Confirmation) Reminder() time.Duration {
	if c.RemindBefore == nil {
		return DefaultRemindBefore
	}
	return *c.RemindBefore
}

// FlagHonoured reports whether the tools' confirm flag is honoured.
func (c Confirmation) FlagHonoured() bool { return c.Enabled == nil || *c.Enabled }

// Validate checks the section (defaults applied); key is its name,
// "confirmation". The rules' expressions are compiled after it (Parse);
// that confirmation.tools name tools is Config's cross-check.
func (c Confirmation) Validate(key string) error {
	if c.Timeout < time.Second {
		return keyerr.New(key+".timeout", "must be a duration of at least 1s, with its unit: 90s, 30m, 2h")
	}
	if c.RemindBefore != nil && *c.RemindBefore < 0 {
		return keyerr.New(key+".remind_before", "must not be negative (0 disables reminders)")
	}
	if a := c.Approvals; a < 0 || a > 10 {
		return keyerr.New(key+".approvals", "must be between 1 and 10 (0 means the default, 1)")
	}
	tiers := slices.Sorted(maps.Keys(c.StepUp))
	for _, tier := range tiers {
		a := confirm.Assurance(c.StepUp[tier])
		switch {
		case !validTier(tier):
			return keyerr.New(key+".step_up."+tier, "not a risk tier (low, medium, high, critical)")
		case !a.Valid():
			return keyerr.New(key+".step_up."+tier, "%q is not passkey, sso or chat", c.StepUp[tier])
		}
	}
	if d := c.Grants.Duration; d < 0 || d > MaxGrantDuration || (d > 0 && d < time.Minute) {
		return keyerr.New(key+".grants.duration", "must be between 1m and 24h, with its unit: 30m, 1h")
	}
	if err := c.validateEscalation(key + ".escalation"); err != nil {
		return err
	}
	return rules.ValidateAll(c.Rules) // names confirmation.rules[N].<key>
}

// Channel is one `channels[]` entry: a channel the bot serves, who may ask
// and approve there, and the tools offered there.
type Channel struct {
	Platform        string   `yaml:"platform"` // shell | slack | discord
	ID              string   `yaml:"id"`       // channel id, "*" for every channel of the platform (not DMs), or "dm" for direct messages
	Approvers       []string `yaml:"approvers"`
	ApproverGroups  []string `yaml:"approver_groups"`  // Slack user group ids
	ApproverRoles   []string `yaml:"approver_roles"`   // Discord role ids
	Requesters      []string `yaml:"requesters"`       // when any requester key is set, only these people may ask
	RequesterGroups []string `yaml:"requester_groups"` // Slack user group ids
	RequesterRoles  []string `yaml:"requester_roles"`  // Discord role ids
	Tools           []string `yaml:"tools"`            // tools offered there; absent: all
	// Runbooks are the runbooks offered there (by name); absent: all.
	Runbooks []string `yaml:"runbooks"`
	// ApprovalsChannel, when set, is a channel id of the same platform
	// where this entry's cards are posted (the thread gets a pointer).
	// Not for platform shell, nor on the "dm" entry.
	ApprovalsChannel string `yaml:"approvals_channel"`
	// Notify lists extra copies of each card: "dm" DMs each approver
	// named by user id (and members of approver groups) a copy.
	Notify []string `yaml:"notify"`
}

// NotifyDM is the `channels[].notify` value asking for a DM copy of each
// card to each approver.
const NotifyDM = "dm"

// OffersRunbook reports whether the entry offers the runbook of that name
// (every runbook when its runbooks key is absent).
func (ch Channel) OffersRunbook(name string) bool {
	return ch.Runbooks == nil || slices.Contains(ch.Runbooks, name)
}

// NotifyDMs reports whether the entry asks for DM copies of its cards.
func (ch Channel) NotifyDMs() bool { return slices.Contains(ch.Notify, NotifyDM) }

// Defaults.
const (
	DefaultListen        = ":8080"
	DefaultSQLiteDSN     = "airlock.db"
	DefaultTimeout       = 30 * time.Minute
	DefaultRemindBefore  = 5 * time.Minute
	DefaultMaxToolRounds = 8

	DefaultMaxCallsPerReply = 32

	DefaultGrantDuration = time.Hour
	MaxGrantDuration     = 24 * time.Hour

	DefaultShutdownTimeout = 30 * time.Second

	DefaultTurnsPerMinute     = 6
	DefaultPendingPerChannel  = 20
	DefaultMaxHistoryMessages = 100
	DefaultMaxMessageChars    = 8000

	// minSecretLen is the shortest ${ENV} value treated as a secret;
	// shorter values (ports, flags) would redact ordinary words.
	minSecretLen = 6
)

// Platforms Airlock knows.
var Platforms = []string{"shell", "slack", "discord"}

// Error is a configuration error naming the key at fault. It is the one
// error every section (tools, mcp_servers, rules, events, telemetry, …)
// returns, so errors.As with a *config.Error finds any of them.
type Error = keyerr.Error

// Load reads, expands, decodes and validates the file at path.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return Parse(data, os.LookupEnv)
}

// Parse expands ${ENV} references in the YAML's values with lookup, decodes
// strictly (unknown keys are errors naming the key), applies defaults,
// validates, and then compiles what the file holds as code (rules,
// templates, schemas).
func Parse(data []byte, lookup func(string) (string, bool)) (*Config, error) {
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("config: the file is empty")
		}
		return nil, fmt.Errorf("config: %w", err)
	}
	var secrets []string
	refs := map[string]string{}
	if err := expandNode(&root, "", lookup, &secrets, refs); err != nil {
		return nil, err
	}
	doc := &root
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		doc = doc.Content[0]
	}
	if doc.Kind != yaml.MappingNode {
		return nil, errors.New("config: the top level must be a mapping of keys")
	}
	if err := checkKeys(doc, reflect.TypeOf(Config{}), ""); err != nil {
		return nil, err
	}
	var c Config
	if err := doc.Decode(&c); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c.secrets, c.stepSecrets = secrets, refs
	c.applyDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if err := c.compile(); err != nil {
		return nil, err
	}
	return &c, nil
}

var envRef = regexp.MustCompile(runbook.RefPattern)

// stepArgs matches the key of a value in a runbook step's arguments,
// where a secret stays a reference (see runbook.ExpandSecrets).
var stepArgs = regexp.MustCompile(`^runbooks\[\d+\]\.(steps|on_failure)\[\d+\]\.args([.\[]|$)`)

// maxSecretFile bounds a file read through ${file:PATH}.
const maxSecretFile = 64 << 10

// expandNode replaces ${NAME} (and ${NAME:-default}) in scalar values with
// environment variables, and ${file:PATH} with a file's text. It
// works on parsed values, so an environment value can never add YAML
// structure or keys. An unset variable without a default is an error naming
// the key and the variable (never its value). In a runbook step's args a
// secret (a value of minSecretLen or more) is not put in: the reference
// stays, as text, and refs maps it to its value, which the bot puts in
// only in memory when the step's tool runs (nothing read from the
// environment or a file is stored in the clear).
func expandNode(n *yaml.Node, path string, lookup func(string) (string, bool), secrets *[]string, refs map[string]string) error {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			if err := expandNode(c, path, lookup, secrets, refs); err != nil {
				return err
			}
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if err := expandNode(n.Content[i+1], join(path, n.Content[i].Value), lookup, secrets, refs); err != nil {
				return err
			}
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			if err := expandNode(c, fmt.Sprintf("%s[%d]", path, i), lookup, secrets, refs); err != nil {
				return err
			}
		}
	case yaml.ScalarNode:
		if !strings.Contains(n.Value, "${") {
			return nil
		}
		var problem error
		inStep := stepArgs.MatchString(path)
		n.Value = envRef.ReplaceAllStringFunc(n.Value, func(ref string) string {
			m := envRef.FindStringSubmatch(ref)
			keep := func(v string) string {
				if len(v) >= minSecretLen {
					*secrets = append(*secrets, v)
					if inStep {
						refs[ref] = v
						return ref
					}
				}
				return v
			}
			if file := m[2]; file != "" {
				v, err := readSecretFile(file)
				if err != nil && problem == nil {
					problem = keyerr.New(path, "%v", err)
				}
				return keep(v)
			}
			if v, ok := lookup(m[3]); ok && v != "" {
				return keep(v)
			}
			if m[4] != "" {
				return keep(m[5])
			}
			if problem == nil {
				problem = keyerr.New(path, "environment variable %s is not set", m[3])
			}
			return ""
		})
		if problem != nil {
			return problem
		}
		if n.Style == 0 {
			n.Tag = "" // a plain scalar: its expanded text decides its type
		}
	}
	return nil
}

// readSecretFile reads a ${file:PATH} value (a Docker or Kubernetes
// secret): the file's text without its trailing newline. Errors name the
// path, never the content.
func readSecretFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("secret file %s: %w", path, errors.Unwrap(err))
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
	if err != nil {
		return "", fmt.Errorf("secret file %s: read: %w", path, err)
	}
	if len(data) > maxSecretFile {
		return "", fmt.Errorf("secret file %s: larger than %d bytes", path, maxSecretFile)
	}
	return strings.TrimRight(string(data), "\r\n"), nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// checkKeys walks the YAML mapping against the struct's yaml tags and
// reports the first unknown key with its full path.
func checkKeys(n *yaml.Node, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() == reflect.Interface {
		return nil // free-form (a JSON Schema, say)
	}
	switch n.Kind {
	case yaml.MappingNode:
		if t.Kind() == reflect.Map {
			for i := 0; i+1 < len(n.Content); i += 2 {
				if err := checkKeys(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value)); err != nil {
					return err
				}
			}
			return nil
		}
		if t.Kind() != reflect.Struct {
			return keyerr.New(path, "%s", typeProblem(n, t))
		}
		fields := map[string]reflect.Type{}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name == "" || name == "-" {
				continue
			}
			fields[name] = f.Type
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			ft, ok := fields[k.Value]
			key := join(path, k.Value)
			if !ok {
				return keyerr.New(key, "unknown key (line %d)", k.Line)
			}
			if err := checkKeys(n.Content[i+1], ft, key); err != nil {
				return err
			}
		}
	case yaml.SequenceNode:
		if t.Kind() != reflect.Slice {
			return keyerr.New(path, "a list is not allowed here")
		}
		for i, c := range n.Content {
			if err := checkKeys(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case yaml.ScalarNode:
		// Decode the value alone so a type error names its key.
		if err := n.Decode(reflect.New(t).Interface()); err != nil {
			return keyerr.New(path, "%s", typeProblem(n, t))
		}
	}
	return nil
}

func typeProblem(n *yaml.Node, t reflect.Type) string {
	switch {
	case t.Kind() == reflect.Struct || t.Kind() == reflect.Map:
		return "expected a mapping of keys"
	case t.Kind() == reflect.Slice:
		return "expected a list"
	case n.Kind == yaml.MappingNode && t == reflect.TypeOf(time.Duration(0)):
		return "expected a duration with its unit (90s, 30m, 2h), not a mapping of keys"
	case n.Kind == yaml.MappingNode:
		return fmt.Sprintf("expected a %s, not a mapping of keys", t.Kind())
	case t == reflect.TypeOf(time.Duration(0)):
		return fmt.Sprintf("%q is not a duration; write it with its unit: 90s, 30m, 2h", n.Value)
	}
	return fmt.Sprintf("%q is not a valid %s", n.Value, t.Kind())
}

func (c *Config) applyDefaults() {
	c.Gateway.SetDefaults()
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.Storage.Driver == "" {
		c.Storage.Driver = "sqlite"
	}
	if c.Storage.Driver == "sqlite" && c.Storage.DSN == "" {
		c.Storage.DSN = DefaultSQLiteDSN
	}
	if c.Slack != nil {
		if c.Slack.Mode == "" {
			c.Slack.Mode = "socket"
		}
		if c.Slack.APIURL == "" {
			c.Slack.APIURL = "https://slack.com/api/"
		}
	}
	if c.Discord != nil && c.Discord.APIURL == "" {
		c.Discord.APIURL = "https://discord.com/api/v9/"
	}
	if c.Model.MaxToolRounds == 0 {
		c.Model.MaxToolRounds = DefaultMaxToolRounds
	}
	if c.Model.MaxCallsPerReply == 0 {
		c.Model.MaxCallsPerReply = DefaultMaxCallsPerReply
	}
	if c.Model.MaxHistoryMessages == 0 {
		c.Model.MaxHistoryMessages = DefaultMaxHistoryMessages
	}
	if c.Model.MaxMessageChars == 0 {
		c.Model.MaxMessageChars = DefaultMaxMessageChars
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = DefaultShutdownTimeout
	}
	if c.Log.Format == "" {
		c.Log.Format = "text"
	}
	if c.Log.Level == "" {
		c.Log.Level = "info"
	}
	if c.Confirmation.Timeout == 0 {
		c.Confirmation.Timeout = DefaultTimeout
	}
}

// Validate checks the values (defaults applied) and names the first bad
// key: each section's own Validate, then what spans sections
// (crossCheck). It compiles nothing and changes nothing.
func (c *Config) Validate() error {
	for _, err := range []error{
		c.Storage.Validate("storage"),
		c.Model.Validate("model"),
		c.Events.Validate("events"),
		c.Telemetry.Validate("telemetry"),
		validateShutdownTimeout(c.ShutdownTimeout),
		c.Log.Validate("log"),
		c.Audit.Validate("audit"),
		c.Limits.Validate("limits"),
		c.Slack.Validate("slack"),
		c.Discord.Validate("discord"),
		c.Confirmation.Validate("confirmation"),
		tools.ValidateAll(c.Tools),         // names tools[N].<key>
		mcptools.ValidateAll(c.MCPServers), // names mcp_servers[N].<key>
		validateChannels("channels", c.Channels),
		c.Gateway.Validate("gateway"),
		c.Web.Validate("web"),
		runbook.ValidateAll("runbooks", c.Runbooks), // names runbooks[N].<key>
		c.crossCheck(),
	} {
		if err != nil {
			return err
		}
	}
	return nil
}

func validateShutdownTimeout(d time.Duration) error {
	if d < 0 {
		return keyerr.New("shutdown_timeout", "must not be negative")
	}
	return nil
}

// crossCheck checks what spans sections: the tools named in confirmation
// and channels exist (configured, built in, or under an MCP server's
// prefix), and no configured tool takes a name under an MCP server's
// prefix.
func (c *Config) crossCheck() error {
	if err := c.checkGatewayClients(); err != nil {
		return err
	}
	for _, tier := range slices.Sorted(maps.Keys(c.Confirmation.StepUp)) {
		a := confirm.Assurance(c.Confirmation.StepUp[tier])
		if a != confirm.AssuranceChat && !c.Web.On() {
			return keyerr.New("confirmation.step_up."+tier, "needs the web console (web.base_url): a step-up vote is made on its page")
		}
		if u, err := url.Parse(c.Web.BaseURL); a == confirm.AssurancePasskey && err == nil && net.ParseIP(u.Hostname()) != nil {
			return keyerr.New("web.base_url", "passkeys (confirmation.step_up.%s) need a domain name here, not an IP address", tier)
		}
	}
	// An MCP server's tools are known only once it answers: a name under a
	// configured server's prefix is accepted.
	mcpServerOf := func(name string) int {
		for j, m := range c.MCPServers {
			if strings.HasPrefix(name, m.Name+mcptools.Separator) {
				return j
			}
		}
		return -1
	}
	known := map[string]bool{}
	for i, m := range c.MCPServers {
		if strings.HasPrefix(m.Name+mcptools.Separator, runbook.ToolPrefix) { // runbook, runbook_…: <server>__<tool> could be runbook__<name>
			return keyerr.New(fmt.Sprintf("mcp_servers[%d].name", i), "%q would clash with the runbooks' tools, named %s<runbook>", m.Name, runbook.ToolPrefix)
		}
	}
	for i, t := range c.Tools {
		if strings.HasPrefix(t.Name, runbook.ToolPrefix) {
			return keyerr.New(fmt.Sprintf("tools[%d].name", i), "%q would clash with the runbooks' tools, named %s<runbook>", t.Name, runbook.ToolPrefix)
		}
		if j := mcpServerOf(t.Name); j >= 0 {
			return keyerr.New(fmt.Sprintf("tools[%d].name", i), "%q would clash with the tools of MCP server mcp_servers[%d] (%q), whose tools are named %s<tool>", t.Name, j, c.MCPServers[j].Name, c.MCPServers[j].Name+mcptools.Separator)
		}
		known[t.Name] = true
	}
	if c.Discord != nil {
		for _, n := range c.Discord.ModerationTools {
			known[n] = true
		}
	}
	checkTools := func(key string, names []string) error {
		for i, name := range names {
			if !known[name] && mcpServerOf(name) < 0 {
				return keyerr.New(fmt.Sprintf("%s[%d]", key, i), "no tool named %q", name)
			}
		}
		return nil
	}
	if err := checkTools("confirmation.tools", c.Confirmation.Tools); err != nil {
		return err
	}
	names := map[string]bool{}
	for _, r := range c.Runbooks {
		names[r.Name] = true
	}
	for i, ch := range c.Channels {
		if err := checkTools(fmt.Sprintf("channels[%d].tools", i), ch.Tools); err != nil {
			return err
		}
		for j, n := range ch.Runbooks {
			if !names[n] {
				return keyerr.New(fmt.Sprintf("channels[%d].runbooks[%d]", i, j), "no runbook named %q", n)
			}
		}
	}
	return nil
}

// hasTool reports whether a tool of that name is known at load: a
// configured tool, an enabled built-in, or a name under an MCP server's
// prefix (whose tools are known once it answers: runbook.CheckTools).
func (c *Config) hasTool(name string) bool {
	for _, t := range c.Tools {
		if t.Name == name {
			return true
		}
	}
	if c.Discord != nil && slices.Contains(c.Discord.ModerationTools, name) {
		return true
	}
	for _, m := range c.MCPServers {
		if strings.HasPrefix(name, m.Name+mcptools.Separator) {
			return true
		}
	}
	return false
}

// compile compiles, once the file is valid, what it holds as code: the
// rules' CEL expressions (kept for RuleSet), the tools' schemas and
// templates and the MCP servers' summaries (checked here; the app builds
// its own tools with its options).
func (c *Config) compile() error {
	compiled, err := rules.Compile(c.Confirmation.Rules)
	if err != nil {
		return err // names confirmation.rules[N].when
	}
	if _, err := tools.New(c.Tools, tools.Options{}); err != nil {
		return err // names tools[N].<key>
	}
	for i, m := range c.MCPServers {
		if _, err := m.ParseSummaries(fmt.Sprintf("mcp_servers[%d]", i)); err != nil {
			return err
		}
	}
	rbs, err := runbook.Compile("runbooks", c.Runbooks, c.hasTool)
	if err != nil {
		return err // names runbooks[N].<key>
	}
	c.Confirmation.compiled = compiled
	c.runbooks = rbs
	return nil
}

// validateChannels checks the channels section (key "channels"): each
// entry, and no platform/id twice.
func validateChannels(key string, chs []Channel) error {
	return keyerr.List(key, chs, Channel.Validate, func(ch Channel) string { return ch.Platform + "/" + ch.ID }, func(ch Channel, k string, first int) error {
		return keyerr.New(k+".id", "%q is already configured for %s in %s[%d]", ch.ID, ch.Platform, key, first)
	})
}

// Validate checks one channels[] entry; key is its place, e.g.
// "channels[0]". That its tools exist is Config's cross-check.
func (ch Channel) Validate(key string) error {
	if !slices.Contains(Platforms, ch.Platform) {
		return keyerr.New(key+".platform", "%q is not one of %s", ch.Platform, strings.Join(Platforms, ", "))
	}
	if ch.ID == "" {
		return keyerr.New(key+".id", `required (a channel id, "*" for every channel, or "dm" for direct messages)`)
	}
	onlyFor := map[string]struct {
		n        int
		platform string
	}{
		"approver_groups":  {len(ch.ApproverGroups), "slack"},
		"requester_groups": {len(ch.RequesterGroups), "slack"},
		"approver_roles":   {len(ch.ApproverRoles), "discord"},
		"requester_roles":  {len(ch.RequesterRoles), "discord"},
	}
	for _, k := range []string{"approver_groups", "requester_groups", "approver_roles", "requester_roles"} {
		if o := onlyFor[k]; o.n > 0 && ch.Platform != o.platform {
			return keyerr.New(key+"."+k, "only for platform %s", o.platform)
		}
	}
	if err := ch.validateRouting(key); err != nil {
		return err
	}
	lists := []struct {
		name string
		ids  []string
	}{
		{"approvers", ch.Approvers}, {"approver_groups", ch.ApproverGroups}, {"approver_roles", ch.ApproverRoles},
		{"requesters", ch.Requesters}, {"requester_groups", ch.RequesterGroups}, {"requester_roles", ch.RequesterRoles},
	}
	for _, l := range lists {
		for j, id := range l.ids {
			if strings.TrimSpace(id) == "" {
				return keyerr.New(fmt.Sprintf("%s.%s[%d]", key, l.name, j), "empty id")
			}
		}
	}
	return nil
}

// Platform id forms, as the adapters check them (adapters/slack's
// channel, user and group id patterns; adapters/discord's snowflakes).
var (
	slackChannelID = regexp.MustCompile(`^[CDGZ][A-Z0-9]{2,40}$`)
	slackUserID    = regexp.MustCompile(`^[UW][A-Z0-9]{2,40}$`)
	slackGroupID   = regexp.MustCompile(`^S[A-Z0-9]{2,40}$`)
	snowflake      = regexp.MustCompile(`^[0-9]{1,20}$`)
)

// validateRouting checks approvals_channel and notify of one channels[]
// entry.
func (ch Channel) validateRouting(key string) error {
	if ac := ch.ApprovalsChannel; ac != "" {
		k := key + ".approvals_channel"
		switch {
		case ch.Platform == "shell":
			return keyerr.New(k, "not for platform shell: the terminal shows cards in the conversation")
		case ch.ID == "dm":
			return keyerr.New(k, "not allowed on the dm entry: a direct message's cards stay in the DM")
		case ac == "*" || ac == "dm":
			return keyerr.New(k, "%q is not a channel id; write the id of one channel", ac)
		case ac == ch.ID:
			return keyerr.New(k, "%q is this entry's own channel; leave the key out to post cards in the thread", ac)
		case ch.Platform == "slack" && !slackChannelID.MatchString(ac):
			return keyerr.New(k, "%q is not a Slack channel id (C0123456789)", ac)
		case ch.Platform == "discord" && !snowflake.MatchString(ac):
			return keyerr.New(k, "%q is not a Discord channel id (digits)", ac)
		}
	}
	for j, n := range ch.Notify {
		k := fmt.Sprintf("%s.notify[%d]", key, j)
		if ch.Platform == "shell" {
			return keyerr.New(k, "not for platform shell: the terminal has no direct messages")
		}
		if n != NotifyDM {
			return keyerr.New(k, "%q is not one of %s", n, NotifyDM)
		}
	}
	return nil
}

// validateEscalation checks confirmation.escalation (at key); Timeout has
// its default already.
func (c Confirmation) validateEscalation(list string) error {
	if len(c.Escalation) > MaxEscalationSteps {
		return keyerr.New(list, "%d steps; at most %d", len(c.Escalation), MaxEscalationSteps)
	}
	for i, st := range c.Escalation {
		key := fmt.Sprintf("%s[%d]", list, i)
		switch {
		case st.After <= 0:
			return keyerr.New(key+".after", "required: a duration greater than 0 since the pause, with its unit: 90s, 10m")
		case i > 0 && st.After <= c.Escalation[i-1].After:
			return keyerr.New(key+".after", "%s must be later than %s[%d].after (%s)", st.After, list, i-1, c.Escalation[i-1].After)
		case st.After >= c.Timeout:
			return keyerr.New(key+".after", "%s must be shorter than confirmation.timeout (%s): a step after expiry would never fire", st.After, c.Timeout)
		}
		for j, m := range st.Mention {
			id, role := strings.CutPrefix(m, MentionRolePrefix)
			if role && snowflake.MatchString(id) || !role && (slackUserID.MatchString(m) || slackGroupID.MatchString(m) || snowflake.MatchString(m)) {
				continue
			}
			return keyerr.New(fmt.Sprintf("%s.mention[%d]", key, j), "%q is not a Slack user id (U…, W…), Slack user group id (S…), Discord user id (digits) or Discord role written role:<id>", m)
		}
		for j, u := range st.Approvers {
			if !slackUserID.MatchString(u) && !snowflake.MatchString(u) {
				return keyerr.New(fmt.Sprintf("%s.approvers[%d]", key, j), "%q is not a user id (Slack U…, W…; Discord digits)", u)
			}
		}
		for j, g := range st.ApproverGroups {
			if !slackGroupID.MatchString(g) {
				return keyerr.New(fmt.Sprintf("%s.approver_groups[%d]", key, j), "%q is not a Slack user group id (S…)", g)
			}
		}
		for j, r := range st.ApproverRoles {
			if !snowflake.MatchString(r) {
				return keyerr.New(fmt.Sprintf("%s.approver_roles[%d]", key, j), "%q is not a Discord role id (digits, without role:)", r)
			}
		}
		if len(st.Mention) == 0 && st.ApproverSet().Empty() {
			return keyerr.New(key, "a step needs mention, approvers, approver_groups or approver_roles")
		}
	}
	return nil
}

// checkGatewayClients checks each gateway client against the channels:
// its channel is served by a channels entry of its platform (that id, or
// "*"), its platform is configured, and acts_for is a user id of that
// platform.
func (c *Config) checkGatewayClients() error {
	if c.Gateway.MCP.Path != "" && len(c.Gateway.Clients) == 0 {
		return keyerr.New("gateway.mcp.path", "no gateway.clients to serve: each client's token opens its MCP sessions")
	}
	for i, cl := range c.Gateway.Clients {
		k := fmt.Sprintf("gateway.clients[%d]", i)
		configured := cl.Channel.Platform == "slack" && c.Slack != nil || cl.Channel.Platform == "discord" && c.Discord != nil
		if !configured {
			return keyerr.New(k+".channel.platform", "%s is not configured (no %s: section)", cl.Channel.Platform, cl.Channel.Platform)
		}
		served := slices.ContainsFunc(c.Channels, func(ch Channel) bool {
			return ch.Platform == cl.Channel.Platform && (ch.ID == cl.Channel.ID || ch.ID == "*")
		})
		if !served {
			return keyerr.New(k+".channel.id", "%s channel %q has no channels entry (its approvers decide the client's cards)", cl.Channel.Platform, cl.Channel.ID)
		}
		if cl.Channel.Platform == "slack" && !slackUserID.MatchString(cl.ActsFor) || cl.Channel.Platform == "discord" && !snowflake.MatchString(cl.ActsFor) {
			return keyerr.New(k+".acts_for", "%q is not a %s user id", cl.ActsFor, cl.Channel.Platform)
		}
	}
	return nil
}
