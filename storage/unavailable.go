package storage

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/mattn/go-sqlite3"

	"github.com/airlockhq/airlock/confirm"
)

// unavailableError is a database error that says the database could not
// be reached or written at all (as opposed to a statement it refused):
// errors.Is(err, confirm.ErrUnavailable) holds, and the driver's error is
// kept for the logs.
type unavailableError struct{ err error }

func (e *unavailableError) Error() string {
	return confirm.ErrUnavailable.Error() + ": " + e.err.Error()
}
func (e *unavailableError) Unwrap() []error {
	return []error{confirm.ErrUnavailable, e.err}
}

// classify marks err as confirm.ErrUnavailable when it says the database
// cannot be reached or written: a refused, reset or closed connection, a
// PostgreSQL server shutting down or not yet accepting connections, an
// SQLite file that is read-only, full, unreadable or locked beyond the
// busy timeout. Other errors are returned as they are.
func classify(err error) error {
	if err == nil || errors.Is(err, confirm.ErrUnavailable) || !unreachable(err) {
		return err
	}
	return &unavailableError{err}
}

func unreachable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		// Class 08: connection exception; 57P01-57P03: the server is
		// shutting down, crashed or not yet accepting connections.
		return strings.HasPrefix(pe.Code, "08") || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03"
	}
	var se sqlite3.Error
	if errors.As(err, &se) {
		switch se.Code {
		case sqlite3.ErrReadonly, sqlite3.ErrFull, sqlite3.ErrIoErr, sqlite3.ErrCantOpen, sqlite3.ErrBusy, sqlite3.ErrLocked:
			return true
		}
		return false
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return true
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return false // the caller's deadline (context.DeadlineExceeded is a net.Error too)
	}
	var ne net.Error
	return errors.As(err, &ne) ||
		errors.Is(err, driver.ErrBadConn) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		pgconn.SafeToRetry(err)
}
