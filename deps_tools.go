//go:build tools

// Package airlock pins the modules the packages are being built on.
package airlock

import (
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "github.com/jmoiron/sqlx"
	_ "github.com/mattn/go-sqlite3"
	_ "github.com/openai/openai-go/v3"
	_ "github.com/santhosh-tekuri/jsonschema/v6"
	_ "go.yaml.in/yaml/v3"
	_ "google.golang.org/genai"
)
