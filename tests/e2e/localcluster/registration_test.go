package localcluster

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// startRegistrar serves a registrar for node-1 on a socket in a temp dir until
// ctx ends or stop is called.
func startRegistrar(ctx context.Context, t *testing.T) (sock string, r *registrar, stop func()) {
	t.Helper()
	sock = filepath.Join(t.TempDir(), "reg.sock")
	r = &registrar{driverName: DriverName, endpoint: "/run/csi/csi.sock", node: "node-1"}
	stop, err := serveRegistration(ctx, sock, r)
	if err != nil {
		t.Fatal(err)
	}
	return sock, r, stop
}

// The kubelet's plugin watcher dials the socket, calls GetInfo, validates the
// answer and reports back with NotifyRegistrationStatus; this walks that path.
func TestRegistrarServesKubeletHandshake(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sock, r, stop := startRegistrar(ctx, t)
	defer stop()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := registerapi.NewRegistrationClient(conn)
	info, err := client.GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil {
		t.Fatalf("GetInfo: %v", err)
	}
	if info.Type != registerapi.CSIPlugin || info.Name != DriverName || info.Endpoint != "/run/csi/csi.sock" ||
		len(info.SupportedVersions) != 1 || info.SupportedVersions[0] != "1.0.0" {
		t.Errorf("GetInfo = %+v, want CSIPlugin %s at /run/csi/csi.sock supporting [1.0.0]", info, DriverName)
	}
	for _, tc := range []struct {
		status *registerapi.RegistrationStatus
		want   bool
	}{
		{&registerapi.RegistrationStatus{PluginRegistered: false, Error: "bad version"}, false},
		{&registerapi.RegistrationStatus{PluginRegistered: true}, true},
	} {
		if _, err := client.NotifyRegistrationStatus(ctx, tc.status); err != nil {
			t.Fatalf("NotifyRegistrationStatus: %v", err)
		}
		r.mu.Lock()
		got, lastErr := r.registered, r.lastError
		r.mu.Unlock()
		if got != tc.want || lastErr != tc.status.Error {
			t.Errorf("after %+v: registered=%v error=%q, want %v %q", tc.status, got, lastErr, tc.want, tc.status.Error)
		}
	}
}

// A DaemonSet pod replacement: the registrar removes its socket on SIGTERM
// (the kubelet then deregisters the plugin) and the new pod serves it again
// at the same path.
func TestRegistrationStopRemovesSocketAndServesAgain(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sock, r, stop := startRegistrar(ctx, t)
	stop()
	if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket after stop: expected it removed, stat says %v", err)
	}
	stop() // a second stop is harmless
	if _, err := serveRegistration(ctx, sock, r); err != nil {
		t.Fatalf("serve again at the same path: %v", err)
	}
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	info, err := registerapi.NewRegistrationClient(conn).GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil || info.Name != DriverName {
		t.Fatalf("GetInfo after serving again = %+v, %v; want %s", info, err, DriverName)
	}
	cancel()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := os.Stat(sock); errors.Is(err, os.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("socket still exists 5 s after the context ended")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
