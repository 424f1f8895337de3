package config

import (
	"crypto/ed25519"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/airlockhq/airlock/keyerr"
	"github.com/airlockhq/airlock/storage"
)

// Audit is the `audit` section: signed checkpoints of the audit's hash
// chain and its retention (docs/audit.md).
type Audit struct {
	// SigningKey is the Ed25519 private key checkpoints are signed with
	// (storage.ParseEd25519PrivateKey: PEM PKCS#8, or the seed in base64 or
	// hex), usually ${file:/run/secrets/airlock-audit.key}; empty: no
	// checkpoints are written.
	SigningKey string `yaml:"signing_key"`
	// CheckpointEvery is when a checkpoint is written: once Rows rows were
	// added since the last one, or Interval passed (and a row was added).
	CheckpointEvery CheckpointEvery `yaml:"checkpoint_every"`
	// Retention prunes audit rows older than this ("400d", "720h"); empty:
	// keep everything. Needs SigningKey.
	Retention string `yaml:"retention"`
}

// CheckpointEvery is `audit.checkpoint_every`.
type CheckpointEvery struct {
	Rows     *int           `yaml:"rows"`     // default 1000
	Interval *time.Duration `yaml:"interval"` // default 1h
}

// Defaults of audit.checkpoint_every.
const (
	DefaultCheckpointRows     = 1000
	DefaultCheckpointInterval = time.Hour
	// MinAuditRetention is the shortest audit.retention accepted.
	MinAuditRetention = 24 * time.Hour
)

// RowCount is how many added rows call for a checkpoint, with its default.
func (e CheckpointEvery) RowCount() int { return intOr(e.Rows, DefaultCheckpointRows) }

// Every is the longest time between checkpoints, with its default.
func (e CheckpointEvery) Every() time.Duration {
	if e.Interval == nil {
		return DefaultCheckpointInterval
	}
	return *e.Interval
}

// Key is the parsed signing key; nil when none is set (or it is bad:
// Validate refuses that).
func (a Audit) Key() ed25519.PrivateKey {
	if a.SigningKey == "" {
		return nil
	}
	k, err := storage.ParseEd25519PrivateKey(a.SigningKey)
	if err != nil {
		return nil
	}
	return k
}

// RetentionPeriod is audit.retention; 0: keep everything.
func (a Audit) RetentionPeriod() time.Duration {
	d, _ := ParseDays(a.Retention)
	return d
}

// ParseDays is time.ParseDuration that also reads whole days ("400d");
// "" is 0.
func ParseDays(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil || days < 0 || days > 100*366 {
			return 0, fmt.Errorf("%q is not a number of days", s)
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration; write it with its unit: 400d, 720h", s)
	}
	return d, nil
}

// Validate checks the section; key is its name, "audit".
func (a Audit) Validate(key string) error {
	if a.SigningKey != "" {
		if _, err := storage.ParseEd25519PrivateKey(a.SigningKey); err != nil {
			return keyerr.Wrap(key+".signing_key", err)
		}
	}
	if r := a.CheckpointEvery.RowCount(); r < 1 {
		return keyerr.New(key+".checkpoint_every.rows", "must be at least 1")
	}
	if d := a.CheckpointEvery.Every(); d < time.Minute {
		return keyerr.New(key+".checkpoint_every.interval", "must be at least 1m, with its unit: 30m, 1h")
	}
	d, err := ParseDays(a.Retention)
	switch {
	case err != nil:
		return keyerr.Wrap(key+".retention", err)
	case a.Retention != "" && d < MinAuditRetention:
		return keyerr.New(key+".retention", "must be at least 1d (leave it out to keep everything)")
	case a.Retention != "" && a.SigningKey == "":
		return keyerr.New(key+".retention", "needs audit.signing_key: pruning writes a signed checkpoint as the chain's new start")
	}
	return nil
}
