package storage

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
)

// readExport calls fn with each row of a JSONL export, in file order.
func readExport(path string, fn func(line int, r AuditRecord) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	for line := 1; ; line++ {
		b, err := br.ReadBytes('\n')
		if len(b) > 0 {
			var r AuditRecord
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
	err = readExport(x.path, func(_ int, r AuditRecord) error {
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
	err = readExport(x.path, func(_ int, r AuditRecord) error {
		if r.ID > after && (!ok || r.ID < id) {
			id, ok = r.ID, true
		}
		return nil
	})
	return id, ok, err
}

// VerifyAuditExport verifies a JSONL export: its rows chain from its first
// row's previous hash (AuditGenesis for an export of the whole audit).
func VerifyAuditExport(ctx context.Context, path string, anchors ...AuditCheckpoint) (AuditVerification, error) {
	var v *ChainVerifier
	err := readExport(path, func(_ int, r AuditRecord) error {
		if v == nil {
			v = NewChainVerifier(r.PrevHash, fileChainIndex{path})
			for _, c := range anchors {
				v.Anchor(c)
			}
		}
		return v.Add(ctx, r)
	})
	if err != nil {
		return AuditVerification{}, err
	}
	if v == nil {
		return AuditVerification{}, fmt.Errorf("%s: no rows", path)
	}
	if err := v.CheckAnchor(); err != nil {
		return AuditVerification{}, err
	}
	id, hash := v.Head()
	return AuditVerification{Rows: v.Rows(), HeadID: id, HeadHash: hash}, nil
}

// exportColumns are the CSV export's columns, in order (docs/audit.md).
var exportColumns = []string{"id", "at", "kind", "conversation_id", "batch_id", "call_key", "tool", "actor", "detail", "prev_hash", "hash", "mac"}

// ExportAudit writes the rows f selects to w in id order with their
// hashes, as "jsonl" (one AuditRecord a line) or "csv" (exportColumns), a
// page of rows at a time.
func (db *DB) ExportAudit(ctx context.Context, f AuditRecordFilter, format string, w io.Writer) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	var write func(AuditRecord) error
	switch format {
	case "csv":
		cw := csv.NewWriter(bw)
		if err := cw.Write(exportColumns); err != nil {
			return err
		}
		write = func(r AuditRecord) error {
			err := cw.Write([]string{strconv.FormatInt(r.ID, 10), utc(r.At).Format(auditTimeLayout), r.Kind,
				strconv.FormatInt(r.ConversationID, 10), r.BatchID, r.CallKey, r.Tool, r.Actor, r.Detail, r.PrevHash, r.Hash, r.MAC})
			if err == nil {
				cw.Flush()
				err = cw.Error()
			}
			return err
		}
	default:
		enc := json.NewEncoder(bw)
		enc.SetEscapeHTML(false)
		write = func(r AuditRecord) error { return enc.Encode(r) }
	}
	if err := db.AuditRecords(ctx, 0, f, write); err != nil {
		return err
	}
	return bw.Flush()
}
