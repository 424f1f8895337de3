package main

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/airlockhq/airlock/storage"
)

// auditVerify walks the audit's hash chain, in the database
// (`airlock audit verify -config FILE`) or in a JSONL export (`-file F`):
// exit 0 with the rows and the head, 1 naming the first bad row.
func auditVerify(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("airlock audit verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "airlock.yaml", "path to the config file")
	file := fs.String("file", "", "verify this JSONL export instead of the database")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 0 {
		fmt.Fprintln(stderr, "usage: airlock audit verify -config FILE | -file EXPORT.jsonl")
		return 2
	}
	var (
		v   storage.AuditVerification
		err error
	)
	if *file != "" {
		v, err = verifyExport(ctx, *file)
	} else {
		var db *storage.DB
		if _, db, err = openStore(ctx, *cfgPath); err != nil {
			fmt.Fprintf(stderr, "airlock: %v\n", err)
			return 1
		}
		defer db.Close()
		v, err = db.VerifyAudit(ctx)
	}
	if err != nil {
		fmt.Fprintf(stderr, "airlock: audit verify: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "audit chain verified: %d rows, head row %d, hash %s\n", v.Rows, v.HeadID, v.HeadHash)
	return 0
}

// readExport calls fn with each row of a JSONL export, in file order.
func readExport(path string, fn func(line int, r storage.AuditRecord) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	for line := 1; ; line++ {
		b, err := br.ReadBytes('\n')
		if len(b) > 0 {
			var r storage.AuditRecord
			if jerr := json.Unmarshal(b, &r); jerr != nil {
				return fmt.Errorf("%s line %d: %w", path, line, jerr)
			}
			if ferr := fn(line, r); ferr != nil {
				return ferr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
}

// fileChainIndex answers a verifier's lookups by reading the export again
// (only once a row broke the chain).
type fileChainIndex struct{ path string }

var errFound = errors.New("found")

func (x fileChainIndex) ByHash(_ context.Context, hash string) (id int64, ok bool, err error) {
	err = readExport(x.path, func(_ int, r storage.AuditRecord) error {
		if r.Hash == hash {
			id, ok = r.ID, true
			return errFound
		}
		return nil
	})
	if errors.Is(err, errFound) {
		err = nil
	}
	return id, ok, err
}

func (x fileChainIndex) After(_ context.Context, after int64) (id int64, ok bool, err error) {
	err = readExport(x.path, func(_ int, r storage.AuditRecord) error {
		if r.ID > after && (!ok || r.ID < id) {
			id, ok = r.ID, true
		}
		return nil
	})
	return id, ok, err
}

// verifyExport verifies a JSONL export: its rows chain from its first
// row's previous hash (AuditGenesis for an export of the whole audit).
func verifyExport(ctx context.Context, path string) (storage.AuditVerification, error) {
	var v *storage.ChainVerifier
	err := readExport(path, func(_ int, r storage.AuditRecord) error {
		if v == nil {
			v = storage.NewChainVerifier(r.PrevHash, fileChainIndex{path})
		}
		return v.Add(ctx, r)
	})
	if err != nil {
		return storage.AuditVerification{}, err
	}
	if v == nil {
		return storage.AuditVerification{}, fmt.Errorf("%s: no rows", path)
	}
	id, hash := v.Head()
	return storage.AuditVerification{Rows: v.Rows(), HeadID: id, HeadHash: hash}, nil
}

// exportColumns are the CSV export's columns, in order (README "Audit").
var exportColumns = []string{"id", "at", "kind", "conversation_id", "batch_id", "call_key", "tool", "actor", "detail", "prev_hash", "hash"}

// auditExport streams audit rows in id order with their hashes, as JSONL
// or CSV, a page at a time.
func auditExport(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("airlock audit export", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "airlock.yaml", "path to the config file")
	format := fs.String("format", "jsonl", "jsonl or csv")
	since := fs.String("since", "", "only rows at or after this time (RFC 3339) or this long ago (e.g. 24h)")
	until := fs.String("until", "", "only rows before this time (RFC 3339) or this long ago")
	conv := fs.Int64("conversation", 0, "only this conversation id")
	tool := fs.String("tool", "", "only this tool")
	actor := fs.String("actor", "", "only this actor")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 0 || (*format != "jsonl" && *format != "csv") {
		fmt.Fprintln(stderr, "usage: airlock audit export -config FILE -format jsonl|csv [-since T] [-until T] [-conversation ID] [-tool NAME] [-actor ID]")
		return 2
	}
	now := time.Now()
	f := storage.AuditRecordFilter{ConversationID: *conv, Tool: *tool, Actor: *actor}
	var err error
	if f.Since, err = parseWhen(*since, now); err != nil {
		fmt.Fprintf(stderr, "airlock: -since: %v\n", err)
		return 2
	}
	if f.Until, err = parseWhen(*until, now); err != nil {
		fmt.Fprintf(stderr, "airlock: -until: %v\n", err)
		return 2
	}
	_, db, err := openStore(ctx, *cfgPath)
	if err != nil {
		fmt.Fprintf(stderr, "airlock: %v\n", err)
		return 1
	}
	defer db.Close()
	if err := exportAudit(ctx, db, f, *format, stdout); err != nil {
		fmt.Fprintf(stderr, "airlock: audit export: %v\n", err)
		return 1
	}
	return 0
}

// exportAudit writes the rows f selects to w.
func exportAudit(ctx context.Context, db *storage.DB, f storage.AuditRecordFilter, format string, w io.Writer) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	var write func(storage.AuditRecord) error
	switch format {
	case "csv":
		cw := csv.NewWriter(bw)
		if err := cw.Write(exportColumns); err != nil {
			return err
		}
		write = func(r storage.AuditRecord) error {
			err := cw.Write([]string{strconv.FormatInt(r.ID, 10), r.At.UTC().Format("2006-01-02T15:04:05.000000Z"), r.Kind,
				strconv.FormatInt(r.ConversationID, 10), r.BatchID, r.CallKey, r.Tool, r.Actor, r.Detail, r.PrevHash, r.Hash})
			if err == nil {
				cw.Flush()
				err = cw.Error()
			}
			return err
		}
	default:
		enc := json.NewEncoder(bw)
		enc.SetEscapeHTML(false)
		write = func(r storage.AuditRecord) error { return enc.Encode(r) }
	}
	if err := db.AuditRecords(ctx, 0, f, write); err != nil {
		return err
	}
	return bw.Flush()
}

// parseWhen reads an RFC 3339 time or a duration before now ("" is none).
func parseWhen(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := parseDays(s); err == nil {
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time nor a duration (24h, 7d)", s)
	}
	return t, nil
}

// parseDays is time.ParseDuration that also reads whole days ("7d").
func parseDays(s string) (time.Duration, error) {
	if n := len(s); n > 1 && s[n-1] == 'd' {
		days, err := strconv.Atoi(s[:n-1])
		if err != nil || days < 0 {
			return 0, fmt.Errorf("bad duration %q", s)
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	return time.ParseDuration(s)
}
