package main

import (
	"context"
	"fmt"

	"github.com/airlockhq/airlock/config"
	"github.com/airlockhq/airlock/redact"
	"github.com/airlockhq/airlock/storage"
)

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
	db, err := storage.Open(ctx, cfg.Storage.Driver, cfg.Storage.DSN, storage.WithScrub(redact.New(cfg.Secrets()).String))
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
