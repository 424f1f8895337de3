package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/airlockhq/airlock/adapters/discord"
	"github.com/airlockhq/airlock/config"
	"github.com/airlockhq/airlock/redact"
)

// configured is what a command of the config file runs with.
type configured struct {
	path   string // the config file
	cfg    *config.Config
	logger *slog.Logger // scrubs the config's secrets
	stdin  io.Reader
	stdout io.Writer
	// logPath is the file chat's log goes to ("" for stderr).
	logPath string
}

// chatLogName is the file `airlock chat` logs to by default, beside its
// config file: the terminal belongs to the conversation.
const chatLogName = "airlock-chat.log"

// withConfig makes a command of the config file (-config): it loads the
// config, builds the logger from its log section, and runs do. chat
// logs to a file (-log; by default chatLogName beside the config file),
// not into the conversation. An error do returns is printed with the
// config's secrets scrubbed, and exits 1; being stopped
// (context.Canceled) exits 0.
func withConfig(name string, do func(context.Context, configured) error) runFunc {
	return func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
		fs, path := configFlags("airlock "+name, stderr)
		var logFlag *string
		if name == "chat" {
			logFlag = fs.String("log", "", "the file chat writes its log to (default "+chatLogName+" beside the config file; - for stderr)")
		}
		if err := fs.Parse(args); err != nil {
			return 2
		}
		cfg, err := config.Load(*path)
		if err != nil {
			fmt.Fprintf(stderr, "airlock: %v\n", err)
			return 1
		}
		var logTo io.Writer = stderr
		logPath := ""
		if logFlag != nil && *logFlag != "-" {
			logPath = *logFlag
			if logPath == "" {
				logPath = filepath.Join(filepath.Dir(*path), chatLogName)
			}
			f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
			if err != nil {
				fmt.Fprintf(stderr, "airlock: the log file (-log): %v\n", err)
				return 1
			}
			defer f.Close()
			logTo = f
		}
		logger := newLogger(logTo, cfg.Log)
		// No log line carries a secret: the config's ${ENV} values, and their
		// encodings, are scrubbed from every record (MCP servers' stderr too).
		secrets := redact.New(cfg.Secrets())
		logger = slog.New(redact.NewHandler(logger.Handler(), secrets))
		err = do(ctx, configured{path: *path, cfg: cfg, logger: logger, stdin: stdin, stdout: stdout, logPath: logPath})
		if err != nil && !errors.Is(err, context.Canceled) {
			fmt.Fprintf(stderr, "airlock: %s\n", secrets.String(err.Error()))
			return 1
		}
		return 0
	}
}

func serveCmd(ctx context.Context, c configured) error { return serve(ctx, c.cfg, c.logger) }

func chatCmd(ctx context.Context, c configured) error {
	return chat(ctx, c.cfg, c.logger, c.stdin, c.stdout, c.logPath)
}

func checkConfig(_ context.Context, c configured) error {
	for _, w := range missingPrograms(c.cfg) {
		fmt.Fprintf(c.stdout, "warning: %s\n", w)
	}
	fmt.Fprintf(c.stdout, "%s: ok\n", c.path)
	return nil
}

func migrateCmd(ctx context.Context, c configured) error { return migrate(ctx, c.cfg, c.stdout) }

func discordInvite(ctx context.Context, c configured) error {
	d := c.cfg.Discord
	if d == nil {
		return errors.New("discord: the config has no discord section")
	}
	u, err := discord.Invite(ctx, discord.Config{Token: d.Token, APIURL: d.APIURL}, d.ModerationTools)
	if err != nil {
		return fmt.Errorf("discord.token: %w", err)
	}
	fmt.Fprintln(c.stdout, u)
	return nil
}
