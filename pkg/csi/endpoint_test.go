package csi

import (
	"strings"
	"testing"
)

// TestParseEndpoint: the two networks, and every malformed endpoint refused with a message
// that says what is wrong (a unix path over sun_path's 107 bytes would otherwise fail to bind
// with a bare "invalid argument").
func TestParseEndpoint(t *testing.T) {
	longest := "/" + strings.Repeat("d", MaxUnixSocketPath-1)
	for _, tc := range []struct {
		ep, network, addr, err string
	}{
		{ep: "unix:///csi/csi.sock", network: "unix", addr: "/csi/csi.sock"},
		{ep: "unix://" + longest, network: "unix", addr: longest},
		{ep: "tcp://127.0.0.1:10000", network: "tcp", addr: "127.0.0.1:10000"},
		{ep: "unix://" + longest + "x", err: "over the 107 a unix socket can bind"},
		{ep: "unix://csi.sock", err: "absolute path"},
		{ep: "unix://", err: "absolute path"},
		{ep: "tcp://127.0.0.1", err: "host:port"},
		{ep: "/csi/csi.sock", err: "must start with unix:// or tcp://"},
	} {
		network, addr, err := ParseEndpoint(tc.ep)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseEndpoint(%.40q...) = %v, want an error containing %q", tc.ep, err, tc.err)
			}
			continue
		}
		if err != nil || network != tc.network || addr != tc.addr {
			t.Errorf("ParseEndpoint(%.40q...) = %q, %q, %v; want %q, %q", tc.ep, network, addr, err, tc.network, tc.addr)
		}
	}
}
