// Package keyerr owns the one configuration error: a problem in the file,
// naming the key at fault ("tools[2].http.url: required"). The config
// package and every section it holds (tools, mcptools, rules, events,
// telemetry) return it; it imports nothing of Airlock's.
package keyerr

import "fmt"

// Error is a configuration error naming the key at fault, such as
// "confirmation.rules[2].when". Callers classify with errors.As.
type Error struct {
	Key string
	Err error
}

func (e *Error) Error() string { return e.Key + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// New is an *Error at key whose cause is formatted as fmt.Errorf does
// (%w wraps).
func New(key, format string, args ...any) error {
	return &Error{Key: key, Err: fmt.Errorf(format, args...)}
}

// Wrap is an *Error at key with err as its cause.
func Wrap(key string, err error) error { return &Error{Key: key, Err: err} }

// List checks a list of sections at key ("tools"): each item with check
// at its own key ("tools[2]"), then that no item has the id of an earlier
// one; dup makes that error from the later item, its key and the earlier
// one's index. The first problem is returned.
func List[T any](key string, items []T, check func(item T, key string) error, id func(T) string, dup func(item T, key string, first int) error) error {
	seen := make(map[string]int, len(items))
	for i, it := range items {
		k := fmt.Sprintf("%s[%d]", key, i)
		if err := check(it, k); err != nil {
			return err
		}
		if j, ok := seen[id(it)]; ok {
			return dup(it, k, j)
		}
		seen[id(it)] = i
	}
	return nil
}
