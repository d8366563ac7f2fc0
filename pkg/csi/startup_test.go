package csi

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestListenUnixEndpoint(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(t *testing.T, sock string)
		wantErr string // "" means listen must succeed
	}{
		{name: "no file", prepare: func(*testing.T, string) {}},
		{name: "stale socket is removed", prepare: func(t *testing.T, sock string) {
			l, err := net.Listen("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			l.(*net.UnixListener).SetUnlinkOnClose(false)
			_ = l.Close()
		}},
		{name: "live socket is refused", prepare: func(t *testing.T, sock string) {
			l, err := net.Listen("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = l.Close() })
		}, wantErr: "is in use by a running process"},
		{name: "regular file is refused", prepare: func(t *testing.T, sock string) {
			if err := os.WriteFile(sock, []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, wantErr: "is not a socket"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sock := filepath.Join(shortDir(t), "csi.sock")
			tc.prepare(t, sock)
			before, statErr := os.Lstat(sock)
			lis, err := listen("unix://" + sock)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("listen = %v, want success", err)
				}
				_ = lis.Close()
				return
			}
			if err == nil {
				_ = lis.Close()
				t.Fatalf("listen succeeded, want an error with %q", tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("listen = %v, want %q", err, tc.wantErr)
			}
			// A refused start leaves the existing file alone.
			after, err := os.Lstat(sock)
			if statErr != nil || err != nil || !os.SameFile(before, after) {
				t.Errorf("%s was replaced or removed (before %v, after %v)", sock, statErr, err)
			}
		})
	}
}

func TestListenLiveSocketStillServes(t *testing.T) {
	sock := filepath.Join(shortDir(t), "csi.sock")
	first, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if second, err := listen("unix://" + sock); err == nil {
		_ = second.Close()
		t.Fatal("second listen succeeded")
	}
	accepted := make(chan error, 1)
	go func() {
		c, err := first.Accept()
		if err == nil {
			_ = c.Close()
		}
		accepted <- err
	}()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatalf("the first server is no longer reachable: %v", err)
	}
	_ = c.Close()
	if err := <-accepted; err != nil {
		t.Fatal(err)
	}
}
