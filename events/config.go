// Package events is Airlock's side channel: every audit event, as signed
// JSON, POSTed to the configured webhooks from the durable outbox storage
// writes in the audit row's transaction. A Deliverer sends each at least
// once, in order per conversation per webhook, retrying with backoff; List
// and Retry are the operator's commands.
package events

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/airlockhq/airlock/events/webhook"
	"github.com/airlockhq/airlock/keyerr"
	"github.com/airlockhq/airlock/storage"
)

// Config is the events section of the config file.
type Config struct {
	Webhooks []Webhook `yaml:"webhooks"`
}

// Webhook is one receiver of events.
type Webhook struct {
	URL    string   `yaml:"url"`
	Secret string   `yaml:"secret"` // signs every request (Airlock-Signature)
	Events []string `yaml:"events"` // the event types it takes; empty: all
	// MaxResultBytes bounds the result a tool_result event carries (cut on
	// a UTF-8 boundary, result_truncated: true); unset: DefaultMaxResultBytes;
	// 0: no result.
	MaxResultBytes *int `yaml:"max_result_bytes"`
}

// MinSecretLen is the shortest webhook secret accepted.
const MinSecretLen = 16

// DefaultMaxResultBytes is the default of events.webhooks[].max_result_bytes;
// MaxMaxResultBytes the most it may be.
const (
	DefaultMaxResultBytes = 16 << 10
	MaxMaxResultBytes     = 1 << 20
)

// ResultBytes is the webhook's max_result_bytes with its default.
func (w Webhook) ResultBytes() int {
	if w.MaxResultBytes == nil {
		return DefaultMaxResultBytes
	}
	return *w.MaxResultBytes
}

// ID is the webhook's stable id, derived from its URL (storage.WebhookID).
func (w Webhook) ID() string { return storage.WebhookID(w.URL) }

// Target is the webhook as storage needs it.
func (w Webhook) Target() storage.WebhookTarget {
	t := storage.WebhookTarget{ID: w.ID(), MaxResultBytes: w.ResultBytes()}
	for _, e := range w.Events {
		t.Events = append(t.Events, webhook.EventType(e))
	}
	return t
}

// Name is the webhook as logs and listings show it: scheme, host and its
// id; never the path or query, which may hold a token.
func (w Webhook) Name() string {
	u, err := url.Parse(w.URL)
	if err != nil || u.Host == "" {
		return w.ID()
	}
	return u.Scheme + "://" + u.Host + " (" + w.ID() + ")"
}

// Targets is what to pass to storage.DB.SetWebhooks.
func (c Config) Targets() []storage.WebhookTarget {
	out := make([]storage.WebhookTarget, 0, len(c.Webhooks))
	for _, w := range c.Webhooks {
		out = append(out, w.Target())
	}
	return out
}

// Validate checks the section; section is its name in the file ("events").
// Its error is a *keyerr.Error naming the key, such as
// "events.webhooks[0].url".
func (c Config) Validate(section string) error {
	known := map[string]bool{}
	var names []string
	for _, t := range webhook.EventTypes {
		known[string(t)] = true
		names = append(names, string(t))
	}
	urls := map[string]int{}
	webhooks := section + ".webhooks"
	for i, w := range c.Webhooks {
		key := fmt.Sprintf("%s[%d]", webhooks, i)
		u, err := url.Parse(w.URL)
		switch {
		case strings.TrimSpace(w.URL) == "":
			return keyerr.New(key+".url", "required")
		case err != nil:
			return keyerr.New(key+".url", "not a URL: %v", err)
		case u.Scheme != "https" && u.Scheme != "http" || u.Host == "":
			return keyerr.New(key+".url", "must be an http:// or https:// URL with a host")
		case u.Fragment != "":
			return keyerr.New(key+".url", "must not have a #fragment")
		}
		if j, dup := urls[w.URL]; dup {
			return keyerr.New(key+".url", "the same URL as %s[%d]", webhooks, j)
		}
		urls[w.URL] = i
		if len(w.Secret) < MinSecretLen {
			return keyerr.New(key+".secret", "required, at least %d characters (e.g. openssl rand -hex 32, given as ${AIRLOCK_WEBHOOK_SECRET})", MinSecretLen)
		}
		if n := w.ResultBytes(); n < 0 || n > MaxMaxResultBytes {
			return keyerr.New(key+".max_result_bytes", "%d: must be between 0 (no result) and %d", n, MaxMaxResultBytes)
		}
		seen := map[string]bool{}
		for j, e := range w.Events {
			if !known[e] {
				return keyerr.New(fmt.Sprintf("%s.events[%d]", key, j), "%q is not one of %s", e, strings.Join(names, ", "))
			}
			if seen[e] {
				return keyerr.New(fmt.Sprintf("%s.events[%d]", key, j), "%q is listed twice", e)
			}
			seen[e] = true
		}
	}
	return nil
}
