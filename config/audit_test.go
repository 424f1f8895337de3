package config

import (
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func auditKey(t *testing.T) (ed25519.PrivateKey, string) {
	t.Helper()
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "airlock-audit.key")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return key, path
}

func TestAuditDefaults(t *testing.T) {
	c, err := Parse([]byte(minimal), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	a := c.Audit
	if a.Key() != nil || a.CheckpointEvery.RowCount() != 1000 || a.CheckpointEvery.Every() != time.Hour || a.RetentionPeriod() != 0 {
		t.Fatalf("audit defaults: key %v, rows %d, interval %v, retention %v", a.Key() != nil, a.CheckpointEvery.RowCount(), a.CheckpointEvery.Every(), a.RetentionPeriod())
	}
}

// The key's forms: PEM PKCS#8 through ${file:}, the seed in hex and in
// base64; each gives the same key.
func TestAuditSigningKeyForms(t *testing.T) {
	key, path := auditKey(t)
	seed := key.Seed()
	for name, v := range map[string]string{
		"pem file":    "${file:" + path + "}",
		"hex seed":    hex.EncodeToString(seed),
		"base64 seed": base64.StdEncoding.EncodeToString(seed),
		"base64 full": base64.StdEncoding.EncodeToString(key),
	} {
		src := minimal + "audit:\n  signing_key: \"" + v + "\"\n  checkpoint_every: {rows: 50, interval: 10m}\n  retention: 400d\n"
		c, err := Parse([]byte(src), env(nil))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !key.Equal(c.Audit.Key()) {
			t.Fatalf("%s: another key", name)
		}
		if c.Audit.CheckpointEvery.RowCount() != 50 || c.Audit.CheckpointEvery.Every() != 10*time.Minute || c.Audit.RetentionPeriod() != 400*24*time.Hour {
			t.Fatalf("%s: %+v", name, c.Audit)
		}
	}
	// The PEM file's text is a secret: scrubbed from what Airlock says.
	c, err := Parse([]byte(minimal+"audit: {signing_key: \"${file:"+path+"}\"}\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Secrets()) == 0 || !strings.Contains(c.Secrets()[0], "PRIVATE KEY") {
		t.Fatalf("the signing key is not among the secrets: %d", len(c.Secrets()))
	}
}

func TestAuditErrorsNameTheKey(t *testing.T) {
	_, path := auditKey(t)
	rsaKey, err := rsa.GenerateKey(strings.NewReader(strings.Repeat("x", 4096)), 1024)
	if err != nil {
		t.Skip(err)
	}
	rsaDER, _ := x509.MarshalPKCS8PrivateKey(rsaKey)
	rsaPath := filepath.Join(t.TempDir(), "rsa.key")
	if err := os.WriteFile(rsaPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: rsaDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	withKey := "audit:\n  signing_key: \"${file:" + path + "}\"\n"
	const secretish = "not-a-key-but-a-password-123"
	for _, tc := range []struct{ name, src, key string }{
		{"bad key", "audit: {signing_key: " + secretish + "}\n", "audit.signing_key"},
		{"short seed", "audit: {signing_key: " + hex.EncodeToString(make([]byte, 31)) + "}\n", "audit.signing_key"},
		{"rsa key", "audit: {signing_key: \"${file:" + rsaPath + "}\"}\n", "audit.signing_key"},
		{"unknown key", "audit: {signing_keys: x}\n", "audit.signing_keys"},
		{"unknown every key", "audit: {checkpoint_every: {rowz: 5}}\n", "audit.checkpoint_every.rowz"},
		{"every as number", "audit: {checkpoint_every: 1000}\n", "audit.checkpoint_every"},
		{"zero rows", "audit: {checkpoint_every: {rows: 0}}\n", "audit.checkpoint_every.rows"},
		{"short interval", "audit: {checkpoint_every: {interval: 30s}}\n", "audit.checkpoint_every.interval"},
		{"retention without key", "audit: {retention: 400d}\n", "audit.retention"},
		{"retention not a duration", withKey + "  retention: forever\n", "audit.retention"},
		{"retention too short", withKey + "  retention: 12h\n", "audit.retention"},
	} {
		_, err := Parse([]byte(minimal+tc.src), env(nil))
		var ke *Error
		if !errors.As(err, &ke) || ke.Key != tc.key {
			t.Errorf("%s: %v, want an error naming %s", tc.name, err, tc.key)
			continue
		}
		if strings.Contains(err.Error(), secretish) {
			t.Errorf("%s: the error quotes the key's value: %v", tc.name, err)
		}
	}
}
