//go:build race

package storage

// raceEnabled: the tests run under the race detector (go test -race).
const raceEnabled = true
