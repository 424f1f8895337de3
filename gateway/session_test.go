package gateway

import "testing"

// A session's thread reads back to its client and session, a session
// holding "/" included; a chat platform's thread is no session.
func TestSessionThread(t *testing.T) {
	for _, tc := range []struct{ client, session string }{{"alice-laptop", "s1"}, {"ci", "a/b/c"}, {"ci", ""}} {
		c, s, ok := SessionOf(SessionThread(tc.client, tc.session))
		if !ok || c != tc.client || s != tc.session {
			t.Errorf("%+v: read back %q %q %v", tc, c, s, ok)
		}
	}
	for _, th := range []string{"", "1700000000.000100", "123456789012345678", "gateway", "gateway//s"} {
		if _, _, ok := SessionOf(th); ok {
			t.Errorf("%q read as a session", th)
		}
	}
}
