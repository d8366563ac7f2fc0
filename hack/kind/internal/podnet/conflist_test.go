package podnet

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRenderConflist(t *testing.T) {
	tests := []struct {
		name    string
		cidr    string
		mtu     int
		want    string // the whole file
		wantErr string
	}{
		{
			name: "kind worker /24",
			cidr: "10.244.1.0/24",
			mtu:  1500,
			want: `{
  "cniVersion": "1.0.0",
  "name": "podnet",
  "plugins": [
    {
      "type": "ptp",
      "ipMasq": false,
      "mtu": 1500,
      "ipam": {
        "type": "host-local",
        "dataDir": "/run/cni-ipam-state",
        "ranges": [
          [
            {
              "subnet": "10.244.1.0/24",
              "gateway": "10.244.1.1"
            }
          ]
        ],
        "routes": [
          {
            "dst": "0.0.0.0/0",
            "gw": "10.244.1.1"
          }
        ]
      }
    },
    {
      "type": "portmap",
      "capabilities": {
        "portMappings": true
      }
    }
  ]
}
`,
		},
		{name: "smallest usable prefix and jumbo MTU", cidr: "192.168.7.4/30", mtu: 9000},
		{name: "IPv6", cidr: "fd00:10:244:1::/64", mtu: 1500, wantErr: "not an IPv4 prefix"},
		{name: "host bits", cidr: "10.244.1.7/24", mtu: 1500, wantErr: "host bits set"},
		{name: "too small", cidr: "10.244.1.0/31", mtu: 1500, wantErr: "too small"},
		{name: "mtu zero", cidr: "10.244.1.0/24", mtu: 0, wantErr: "outside 68..65535"},
		{name: "mtu huge", cidr: "10.244.1.0/24", mtu: 70000, wantErr: "outside 68..65535"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := RenderConflist(netip.MustParsePrefix(tt.cidr), tt.mtu)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.want != "" && string(got) != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
			if tt.cidr == "192.168.7.4/30" {
				for _, s := range []string{`"subnet": "192.168.7.4/30"`, `"gateway": "192.168.7.5"`, `"gw": "192.168.7.5"`, `"mtu": 9000`} {
					if !strings.Contains(string(got), s) {
						t.Errorf("missing %s in\n%s", s, got)
					}
				}
			}
			again, _ := RenderConflist(netip.MustParsePrefix(tt.cidr), tt.mtu)
			if string(again) != string(got) {
				t.Error("output is not stable across calls")
			}
		})
	}
}

func TestWriteFileIfChanged(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "net.d") // does not exist yet: created
	steps := []struct {
		data        string
		wantChanged bool
	}{
		{"a\n", true},
		{"a\n", false},
		{"b\n", true},
	}
	for i, s := range steps {
		changed, err := WriteFileIfChanged(dir, "10-x.conflist", []byte(s.data))
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if changed != s.wantChanged {
			t.Errorf("step %d: changed = %v, want %v", i, changed, s.wantChanged)
		}
		got, err := os.ReadFile(filepath.Join(dir, "10-x.conflist"))
		if err != nil || string(got) != s.data {
			t.Errorf("step %d: file = %q, %v; want %q", i, got, err, s.data)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("dir holds %d entries, want only the conflist (no temporary left behind)", len(entries))
	}
	fi, _ := os.Stat(filepath.Join(dir, "10-x.conflist"))
	if fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", fi.Mode().Perm())
	}
}
