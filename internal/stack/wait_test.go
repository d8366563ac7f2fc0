package stack

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// identity answers Probe with ready=false until it was asked notReady times.
type identity struct {
	csi.UnimplementedIdentityServer
	calls, notReady int32
}

func (i *identity) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	n := atomic.AddInt32(&i.calls, 1)
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(n > i.notReady)}, nil
}

// serve serves id on a unix socket under dir once after has passed, and returns its endpoint.
func serve(t *testing.T, id *identity, after time.Duration) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "csi.sock")
	srv := grpc.NewServer()
	csi.RegisterIdentityServer(srv, id)
	t.Cleanup(srv.Stop)
	go func() {
		time.Sleep(after) // the plugin serves its socket later than it was started
		ln, err := net.Listen("unix", sock)
		if err != nil {
			t.Error(err)
			return
		}
		_ = srv.Serve(ln)
	}()
	return "unix://" + sock
}

func TestWaitProbe(t *testing.T) {
	id := &identity{notReady: 2}
	if err := WaitProbe(context.Background(), serve(t, id, 50*time.Millisecond), 10*time.Second); err != nil {
		t.Fatalf("WaitProbe = %v", err)
	}
	if got := atomic.LoadInt32(&id.calls); got != 3 {
		t.Errorf("ready after %d probes, want 3 (2 not ready)", got)
	}
	never := &identity{notReady: 1 << 30}
	err := WaitProbe(context.Background(), serve(t, never, 0), 200*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "not ready") {
		t.Errorf("WaitProbe of a plugin never ready = %v, want a timeout naming its last answer", err)
	}
	err = WaitProbe(context.Background(), "unix://"+filepath.Join(t.TempDir(), "none.sock"), 100*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("WaitProbe of a socket never made = %v, want a timeout naming the missing socket", err)
	}
}
