package storage

import (
	"bytes"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// AuditCheckpoint is an anchor of the chain held outside Airlock: the head
// row's id and hash at a time, signed with Ed25519 (docs/audit.md).
type AuditCheckpoint struct {
	ID        int64     `json:"id"`
	Hash      string    `json:"hash"`
	At        time.Time `json:"at"`
	Signature string    `json:"signature,omitempty"` // base64 of the Ed25519 signature of SignedBytes
	// Start marks the checkpoint retention writes before it prunes: row
	// ID (pruned) is the predecessor of the chain's new first row.
	Start bool `json:"start,omitempty"`
	// PublicKey is the base64 of the key that signed it (informative:
	// verify checks against the key it is given, never this one).
	PublicKey string `json:"public_key,omitempty"`
}

// SignedBytes are what a checkpoint's signature covers:
// "airlock-audit-checkpoint-v1\n" id "\n" hash "\n" at, the id in decimal
// and at as the audit's canonical time (UTC, microseconds); a start
// checkpoint's begin "airlock-audit-start-v1\n" instead, so a periodic
// checkpoint can never pass for the start of a pruned chain.
func (c AuditCheckpoint) SignedBytes() []byte {
	prefix := "airlock-audit-checkpoint-v1\n"
	if c.Start {
		prefix = "airlock-audit-start-v1\n"
	}
	return []byte(prefix + strconv.FormatInt(c.ID, 10) + "\n" + c.Hash + "\n" + utc(c.At).Format(auditTimeLayout))
}

// Sign sets the checkpoint's signature (and PublicKey).
func (c *AuditCheckpoint) Sign(key ed25519.PrivateKey) {
	c.Signature = base64.StdEncoding.EncodeToString(ed25519.Sign(key, c.SignedBytes()))
	c.PublicKey = base64.StdEncoding.EncodeToString(key.Public().(ed25519.PublicKey))
}

// ErrCheckpointSignature is a checkpoint whose signature does not verify.
var ErrCheckpointSignature = errors.New("audit checkpoint signature does not verify")

// VerifySignature checks the signature against pub.
func (c AuditCheckpoint) VerifySignature(pub ed25519.PublicKey) error {
	sig, err := base64.StdEncoding.DecodeString(c.Signature)
	if err != nil || !ed25519.Verify(pub, c.SignedBytes(), sig) {
		return fmt.Errorf("checkpoint at row %d: %w", c.ID, ErrCheckpointSignature)
	}
	return nil
}

// ReadAuditCheckpoint reads a checkpoint (JSON, as the audit_checkpoint
// event's data) from path.
func ReadAuditCheckpoint(path string) (AuditCheckpoint, error) {
	var c AuditCheckpoint
	b, err := os.ReadFile(path)
	if err != nil {
		return c, fmt.Errorf("read checkpoint: %w", err)
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	if c.ID <= 0 || len(c.Hash) != 64 {
		return c, fmt.Errorf("checkpoint %s: want a positive id and a 64-digit hash", path)
	}
	return c, nil
}

// ReadEd25519PublicKey reads a public key: 32 raw bytes, or their base64
// or hex on one line.
func ReadEd25519PublicKey(path string) (ed25519.PublicKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read public key: %w", err)
	}
	if len(b) == ed25519.PublicKeySize {
		return ed25519.PublicKey(b), nil
	}
	s := string(bytes.TrimSpace(b))
	if k, err := base64.StdEncoding.DecodeString(s); err == nil && len(k) == ed25519.PublicKeySize {
		return ed25519.PublicKey(k), nil
	}
	if k, err := hex.DecodeString(s); err == nil && len(k) == ed25519.PublicKeySize {
		return ed25519.PublicKey(k), nil
	}
	return nil, fmt.Errorf("public key %s: want 32 bytes of Ed25519 key, raw, base64 or hex", path)
}

// ParseEd25519PrivateKey reads the signing key (audit.signing_key): a PEM
// "PRIVATE KEY" block (PKCS#8, as `openssl genpkey -algorithm ed25519`
// writes), or the 32-byte seed (or the 64-byte seed and public key) in
// base64 or hex, the forms ReadEd25519PublicKey reads for the public key.
// Errors never quote the value.
func ParseEd25519PrivateKey(s string) (ed25519.PrivateKey, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "-----BEGIN") {
		block, _ := pem.Decode([]byte(s))
		if block == nil || block.Type != "PRIVATE KEY" {
			return nil, errors.New(`want a PEM "PRIVATE KEY" block (PKCS#8)`)
		}
		k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, errors.New("the PEM block is not a PKCS#8 private key")
		}
		ek, ok := k.(ed25519.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("the PEM block holds a %T, not an Ed25519 key", k)
		}
		return ek, nil
	}
	var b []byte
	if k, err := hex.DecodeString(s); err == nil {
		b = k
	} else if k, err := base64.StdEncoding.DecodeString(s); err == nil {
		b = k
	}
	switch len(b) {
	case ed25519.SeedSize:
		return ed25519.NewKeyFromSeed(b), nil
	case ed25519.PrivateKeySize:
		k := ed25519.NewKeyFromSeed(b[:ed25519.SeedSize])
		if !bytes.Equal(k[ed25519.SeedSize:], b[ed25519.SeedSize:]) {
			return nil, errors.New("the 64-byte key's public half does not match its seed")
		}
		return k, nil
	}
	return nil, errors.New("want an Ed25519 private key: PEM PKCS#8, or the 32-byte seed in base64 or hex")
}

// Anchor makes the verifier check the chain still holds the checkpoint's
// row with its hash; CheckAnchor, after the last row, says whether it did.
func (v *ChainVerifier) Anchor(c AuditCheckpoint) { v.anchor = &c }

// CheckAnchor reports a chain that ends before the anchor's row (the
// tail after an earlier row was deleted: "truncated"), lacks it, or holds
// another hash for it (the chain was rewritten).
func (v *ChainVerifier) CheckAnchor() error {
	c := v.anchor
	if c == nil {
		return nil
	}
	at := utc(c.At).Format(time.RFC3339)
	switch {
	case v.anchorHash == "" && v.prevID < c.ID:
		return &AuditBreak{ID: c.ID, What: "truncated",
			Detail: fmt.Sprintf("the checkpoint of %s names row %d, but the chain ends at row %d: rows after it were deleted", at, c.ID, v.prevID)}
	case v.anchorHash == "":
		return &AuditBreak{ID: c.ID, What: "deleted", Detail: fmt.Sprintf("the checkpoint of %s names row %d, which is missing", at, c.ID)}
	case v.anchorHash != c.Hash:
		return &AuditBreak{ID: c.ID, What: "edited", Detail: fmt.Sprintf("the checkpoint of %s holds another hash for row %d: the chain was rewritten up to it", at, c.ID)}
	}
	return nil
}
