package main

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"io"
	"time"

	"github.com/airlockhq/airlock/config"
	"github.com/airlockhq/airlock/gateway"
	"github.com/airlockhq/airlock/storage"
)

// auditVerify walks the audit's hash chain, in the database
// (`airlock audit verify -config FILE`, opened read-only) or in a JSONL
// export (`-file F`): exit 0 with the rows and the head, 1 naming the
// first bad row, 3 when the database holds checkpoints and no key checked
// them (unless -allow-unchecked-checkpoints).
func auditVerify(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs, cfgPath := configFlags("airlock audit verify", stderr)
	file := fs.String("file", "", "verify this JSONL export instead of the database")
	checkpoint := fs.String("checkpoint", "", "a checkpoint held outside Airlock (JSON): the chain must still hold its row, with its hash")
	pubkey := fs.String("pubkey", "", "the Ed25519 public key of audit.signing_key: checks -checkpoint's signature and every stored checkpoint (default: the public half of the config's audit.signing_key)")
	allowUnchecked := fs.Bool("allow-unchecked-checkpoints", false, "exit 0 although the database holds checkpoints and no key (-pubkey, or audit.signing_key in the config) checked them")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 0 {
		fmt.Fprintln(stderr, "usage: airlock audit verify -config FILE | -file EXPORT.jsonl [-checkpoint FILE] [-pubkey FILE] [-allow-unchecked-checkpoints]")
		return 2
	}
	var (
		pub    ed25519.PublicKey
		keyBy  string // where pub came from, for the output
		mac    *storage.AuditMAC
		cfg    *config.Config
		anchor []storage.AuditCheckpoint
	)
	if *pubkey != "" {
		var err error
		if pub, err = storage.ReadEd25519PublicKey(*pubkey); err != nil {
			fmt.Fprintf(stderr, "airlock: audit verify: %v\n", err)
			return 1
		}
		keyBy = "-pubkey"
	}
	if *file == "" {
		var err error
		if cfg, err = config.Load(*cfgPath); err != nil {
			fmt.Fprintf(stderr, "airlock: %v\n", err)
			return 1
		}
		if k := cfg.Audit.Key(); k != nil {
			mac = storage.NewAuditMAC(k)
			if pub == nil {
				pub, keyBy = k.Public().(ed25519.PublicKey), "the public half of audit.signing_key"
			}
		}
	}
	if *checkpoint != "" {
		c, err := storage.ReadAuditCheckpoint(*checkpoint)
		if err == nil && pub != nil {
			err = c.VerifySignature(pub)
		}
		if err != nil {
			fmt.Fprintf(stderr, "airlock: audit verify: %v\n", err)
			return 1
		}
		if pub == nil {
			fmt.Fprintln(stderr, "airlock: audit verify: the checkpoint's signature is not checked (no -pubkey, no audit.signing_key)")
		}
		anchor = append(anchor, c)
	}
	var (
		v   storage.AuditVerification
		err error
	)
	if *file != "" {
		v, err = storage.VerifyAuditExport(ctx, *file, anchor...)
	} else {
		// Read-only: verify migrates, chains and writes nothing, so what it
		// names stays named (docs/audit.md).
		db, oerr := storage.OpenReadOnly(ctx, cfg.Storage.Driver, cfg.Storage.DSN)
		if oerr != nil {
			fmt.Fprintf(stderr, "airlock: audit verify: %v\n", oerr)
			return 1
		}
		defer db.Close()
		v, err = db.VerifyAuditWith(ctx, storage.VerifyOptions{Anchors: anchor, PublicKey: pub, MAC: mac})
	}
	if err != nil {
		fmt.Fprintf(stderr, "airlock: audit verify: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "audit chain verified: %d rows, head row %d, hash %s\n", v.Rows, v.HeadID, v.HeadHash)
	if s := v.Start; s.ID != 0 {
		signed := "its signature checked"
		if pub == nil {
			signed = "its signature NOT checked"
		}
		fmt.Fprintf(stdout, "the chain starts after row %d: rows up to it were pruned (start checkpoint of %s, %s)\n", s.ID, s.At.UTC().Format(time.RFC3339), signed)
	}
	if *file != "" {
		return 0
	}
	if mac != nil {
		fmt.Fprintf(stdout, "row MACs verified: %d rows (with audit.signing_key)", v.MACRows)
		if v.BareRows > 0 {
			fmt.Fprintf(stdout, "; the %d rows before them carry none (written before the key was set, or before this release)", v.BareRows)
		}
		fmt.Fprintln(stdout)
	} else {
		fmt.Fprintln(stderr, "airlock: audit verify: WARNING: row MACs NOT checked (the config has no audit.signing_key): "+
			"a row appended, head and all, by someone with write access to the database since the last checkpoint would pass")
	}
	if pub != nil {
		fmt.Fprintf(stdout, "stored checkpoints verified: %d (with %s)\n", v.Checkpoints, keyBy)
		return 0
	}
	if v.Stored == 0 {
		fmt.Fprintln(stdout, "stored checkpoints: none")
		return 0
	}
	fmt.Fprintf(stderr, "airlock: audit verify: WARNING: %s NOT checked: give -pubkey KEY, or a config holding audit.signing_key. "+
		"Unchecked, a checkpoint stored by someone without the key passes, and so do rows deleted behind a start checkpoint of their making.\n", storedCheckpoints(v))
	if !*allowUnchecked {
		fmt.Fprintln(stderr, "airlock: audit verify: exit 3: the checkpoints could not be checked (-allow-unchecked-checkpoints accepts that)")
		return 3
	}
	fmt.Fprintln(stderr, "airlock: audit verify: accepted unchecked (-allow-unchecked-checkpoints)")
	return 0
}

// storedCheckpoints says how many checkpoints the database holds.
func storedCheckpoints(v storage.AuditVerification) string {
	s := fmt.Sprintf("%d stored checkpoint", v.Stored)
	if v.Stored != 1 {
		s += "s"
	}
	if v.StoredStarts > 0 {
		s += fmt.Sprintf(" (%d start checkpoint", v.StoredStarts)
		if v.StoredStarts != 1 {
			s += "s"
		}
		s += ")"
	}
	if v.Stored == 1 {
		return s + " was"
	}
	return s + " were"
}

// auditExport streams audit rows in id order with their hashes, as JSONL
// or CSV, a page at a time.
func auditExport(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs, cfgPath := configFlags("airlock audit export", stderr)
	format := fs.String("format", "jsonl", "jsonl or csv")
	since := fs.String("since", "", "only rows at or after this time (RFC 3339) or this long ago (e.g. 7d, 24h)")
	until := fs.String("until", "", "only rows before this time (RFC 3339) or this long ago (e.g. 1d)")
	conv := fs.Int64("conversation", 0, "only this conversation id")
	tool := fs.String("tool", "", "only this tool")
	actor := fs.String("actor", "", "only this actor")
	client := fs.String("client", "", "only the sessions of this gateway client (gateway.clients[].name)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 0 || (*format != "jsonl" && *format != "csv") {
		fmt.Fprintln(stderr, "usage: airlock audit export -config FILE -format jsonl|csv [-since T] [-until T] [-conversation ID] [-tool NAME] [-actor ID] [-client NAME]")
		return 2
	}
	from, err := parseWhen("since", *since)
	if err != nil {
		fmt.Fprintf(stderr, "airlock: %v\n", err)
		return 2
	}
	to, err := parseWhen("until", *until)
	if err != nil {
		fmt.Fprintf(stderr, "airlock: %v\n", err)
		return 2
	}
	_, db := openStoreFor(ctx, *cfgPath, stderr)
	if db == nil {
		return 1
	}
	defer db.Close()
	f := storage.AuditRecordFilter{ConversationID: *conv, Tool: *tool, Actor: *actor, Since: from.time(db.Clock()), Until: to.time(db.Clock())}
	if *client != "" {
		f.ThreadPrefixes = gateway.ClientThreads(*client)
	}
	if err := db.ExportAudit(ctx, f, *format, stdout); err != nil {
		fmt.Fprintf(stderr, "airlock: audit export: %v\n", err)
		return 1
	}
	return 0
}

// when is the value of an audit command's -since or -until: a duration
// before the database's clock ("7d", "24h"), an RFC 3339 time, or none
// ("" or "0"). Every audit subcommand reads it with parseWhen.
type when struct {
	ago time.Duration
	at  time.Time
}

// parseWhen reads a -since or -until value; flag names it in the error.
func parseWhen(flag, s string) (when, error) {
	if s == "" || s == "0" {
		return when{}, nil
	}
	if d, err := config.ParseDays(s); err == nil && d > 0 {
		return when{ago: d}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return when{}, fmt.Errorf("-%s: %q is neither an RFC 3339 time nor a duration (7d, 24h; 0 for every row)", flag, s)
	}
	return when{at: t}, nil
}

// time is the instant w names on the clock now (zero for none).
func (w when) time(now func() time.Time) time.Time {
	if w.ago > 0 {
		return now().Add(-w.ago)
	}
	return w.at
}
