package storage

import "testing"

// An operator's own malloc trim setting is left alone.
func TestOperatorTunesTrim(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want bool
	}{
		{map[string]string{}, false},
		{map[string]string{"GLIBC_TUNABLES": "glibc.malloc.arena_max=2"}, false},
		{map[string]string{"GLIBC_TUNABLES": "glibc.malloc.arena_max=2:glibc.malloc.trim_threshold=0"}, true},
		{map[string]string{"MALLOC_TRIM_THRESHOLD_": "131072"}, true},
	} {
		if got := operatorTunesTrim(func(k string) string { return tc.env[k] }); got != tc.want {
			t.Errorf("operatorTunesTrim(%v) = %v, want %v", tc.env, got, tc.want)
		}
	}
}
