//go:build !cgo

package storage

// Airlock stores its state in SQLite through github.com/mattn/go-sqlite3,
// which is C code: building Airlock needs cgo, that is a C compiler (gcc or
// clang) on PATH and CGO_ENABLED=1. When the go command finds no C compiler
// it silently turns cgo off, and the build would fail with "undefined:
// sqlite3.Error", which never says why. This file is compiled only then, so
// the first error names the cause instead:
//
//	storage/nocgo.go: undefined: airlock_needs_cgo__install_gcc_and_build_with_CGO_ENABLED_1
//
// Fix: install a C compiler (Debian/Ubuntu: apt-get install gcc; Alpine: apk
// add build-base; macOS: xcode-select --install) and build with
// CGO_ENABLED=1 go build ./cmd/airlock.
var _ = airlock_needs_cgo__install_gcc_and_build_with_CGO_ENABLED_1
