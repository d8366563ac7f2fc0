package localcluster

import (
	"strings"
	"testing"
)

func TestCheckInotify(t *testing.T) {
	for _, tc := range []struct {
		name               string
		limit, used, nodes int
		wantErr            string
	}{
		{"three nodes under the default limit", 128, 10, 3, ""},
		{"a hundred nodes under the default limit", 128, 10, 100, "sysctl -w fs.inotify.max_user_instances=1024"},
		{"a hundred nodes with room", 1024, 131, 100, ""},
		{"over the limit already", 128, 140, 1, "only 0 of"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkInotify(tc.limit, tc.used, tc.nodes)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("checkInotify: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("checkInotify = %v, want an error with %q", err, tc.wantErr)
			}
		})
	}
}
