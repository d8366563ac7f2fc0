package server

import "testing"

// TestMaxWaitsDefault: without Config.MaxWaits a cloud holds half as many waits as it serves
// connections (at least one), so waits never hold every connection.
func TestMaxWaitsDefault(t *testing.T) {
	for _, tc := range []struct{ maxConns, maxWaits, want int }{
		{0, 0, DefaultMaxWaits},
		{10, 0, 5},
		{1, 0, 1},
		{10, 7, 7},
	} {
		s, err := New(Config{Auth: AuthNone, MaxConnections: tc.maxConns, MaxWaits: tc.maxWaits})
		if err != nil {
			t.Fatal(err)
		}
		if got := cap(s.waits); got != tc.want {
			t.Errorf("MaxConnections %d, MaxWaits %d: %d waits, want %d", tc.maxConns, tc.maxWaits, got, tc.want)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := New(Config{Auth: AuthNone, MaxWaits: -1}); err == nil {
		t.Error("MaxWaits -1 accepted")
	}
}
