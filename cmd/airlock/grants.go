package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/user"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/airlockhq/airlock/confirm"
)

// grants lists grants (`airlock grants -config FILE [-active]`) or revokes
// one (`airlock grants revoke -config FILE ID`).
func grants(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	revoke := len(args) > 0 && args[0] == "revoke"
	name := "airlock grants"
	if revoke {
		args, name = args[1:], "airlock grants revoke"
	}
	fs, cfgPath := configFlags(name, stderr)
	active := fs.Bool("active", false, "only grants active now")
	var id string
	if revoke && len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		id, args = args[0], args[1:] // airlock grants revoke ID -config FILE
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if revoke && id == "" && fs.NArg() == 1 {
		id = fs.Arg(0)
	} else if revoke && fs.NArg() != 0 {
		id = ""
	}
	if revoke && id == "" {
		fmt.Fprintln(stderr, "usage: airlock grants revoke -config FILE ID")
		return 2
	}
	_, db := openStoreFor(ctx, *cfgPath, stderr)
	if db == nil {
		return 1
	}
	defer db.Close()
	return grantsIn(ctx, db, db.Clock()(), revoke, id, *active, stdout, stderr)
}

// grantsIn revokes the grant id (revoke) or lists the grants (only those
// active at now when active), using only the store's grants.
func grantsIn(ctx context.Context, db confirm.GrantStore, now time.Time, revoke bool, id string, active bool, stdout, stderr io.Writer) int {
	if revoke {
		by := "cli"
		if u, err := user.Current(); err == nil {
			by = "cli:" + u.Username
		}
		ok, err := db.RevokeGrant(ctx, id, by)
		switch {
		case err != nil:
			fmt.Fprintf(stderr, "airlock: %v\n", err)
			return 1
		case !ok:
			if _, err := db.Grant(ctx, id); errors.Is(err, confirm.ErrNotFound) {
				fmt.Fprintf(stderr, "airlock: no grant %q\n", id)
			} else {
				fmt.Fprintf(stderr, "airlock: grant %s was already revoked\n", id)
			}
			return 1
		}
		fmt.Fprintf(stdout, "grant %s revoked; calls of its tool need a card again\n", id)
		return 0
	}
	f := confirm.GrantFilter{}
	if active {
		f.ActiveAt = now
	}
	list, err := db.Grants(ctx, f)
	if err != nil {
		fmt.Fprintf(stderr, "airlock: %v\n", err)
		return 1
	}
	if len(list) == 0 {
		fmt.Fprintln(stdout, "no grants")
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tCONV\tTOOL\tBY\tFOR\tCREATED (UTC)\tUNTIL (UTC)\tSTATE")
	for _, g := range list {
		state := "active"
		switch {
		case g.RevokedAt != nil:
			state = fmt.Sprintf("revoked by %s at %s", g.RevokedBy, g.RevokedAt.UTC().Format(time.DateTime))
		case !g.Active(now):
			state = "expired"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", g.ID, g.ConversationID, g.Tool, g.CreatedBy, g.Requester,
			g.CreatedAt.UTC().Format(time.DateTime), g.ExpiresAt.UTC().Format(time.DateTime), state)
	}
	tw.Flush()
	return 0
}
