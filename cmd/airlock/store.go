package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/airlockhq/airlock/config"
	"github.com/airlockhq/airlock/redact"
	"github.com/airlockhq/airlock/storage"
)

// configFlags is the flag set of a command of the config file, with its
// -config flag; flag errors and usage go to stderr.
func configFlags(name string, stderr io.Writer) (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs, fs.String("config", "airlock.yaml", "path to the config file")
}

// openStoreFor is openStore for a command: an error is printed to stderr,
// and the database is nil.
func openStoreFor(ctx context.Context, cfgPath string, stderr io.Writer) (*config.Config, *storage.DB) {
	cfg, db, err := openStore(ctx, cfgPath)
	if err != nil {
		fmt.Fprintf(stderr, "airlock: %v\n", err)
		return nil, nil
	}
	return cfg, db
}

// openStore loads the config and opens its database for an operator
// command (audit, grants, events): migrations applied, the database clock
// measured, and the webhooks known, so what the command changes reaches
// them like the running bot's changes do.
func openStore(ctx context.Context, cfgPath string) (*config.Config, *storage.DB, error) {
	cfg, err := config.Load(cfgPath)
	if err != nil {
		return nil, nil, err
	}
	// What the command audits reaches the webhooks scrubbed, as the bot's.
	// Its audit rows carry their MACs as the bot's do (audit.signing_key).
	db, err := storage.Open(ctx, cfg.Storage.Driver, cfg.Storage.DSN, storage.WithScrub(redact.New(cfg.Secrets()).String), storage.WithAuditKey(cfg.Audit.Key()))
	if err != nil {
		return nil, nil, err
	}
	if err := db.SetWebhooks(cfg.Events.Targets()); err != nil {
		db.Close()
		return nil, nil, err
	}
	if err := db.SyncClock(ctx); err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("database clock: %w", err)
	}
	return cfg, db, nil
}
