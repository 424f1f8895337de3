//go:build !linux && cgo

package storage

// setTrimThreshold does nothing where the C allocator is not glibc's.
func setTrimThreshold(int) {}
