package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/airlockhq/airlock/events"
)

// eventsCmd lists webhook deliveries not yet accepted
// (`airlock events -config FILE [-dead]`) or sends a dead one again
// (`airlock events retry ID -config FILE`).
func eventsCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	retry := len(args) > 0 && args[0] == "retry"
	name := "airlock events"
	var id string
	if retry {
		args, name = args[1:], "airlock events retry"
		if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
			id, args = args[0], args[1:]
		}
	}
	fs, cfgPath := configFlags(name, stderr)
	dead := fs.Bool("dead", false, "only dead deliveries")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if retry && id == "" && fs.NArg() == 1 {
		id = fs.Arg(0)
	}
	if retry && (id == "" || fs.NArg() > 1) {
		fmt.Fprintln(stderr, "usage: airlock events retry ID -config FILE")
		return 2
	}
	cfg, db := openStoreFor(ctx, *cfgPath, stderr)
	if db == nil {
		return 1
	}
	defer db.Close()
	if retry {
		if err := events.Retry(ctx, db, id); err != nil {
			fmt.Fprintf(stderr, "airlock: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "delivery %s will be sent again\n", id)
		return 0
	}
	if err := events.List(ctx, db, stdout, cfg.Events.Webhooks, *dead); err != nil {
		fmt.Fprintf(stderr, "airlock: %v\n", err)
		return 1
	}
	return 0
}
