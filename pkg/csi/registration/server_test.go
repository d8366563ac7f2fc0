package registration

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/klog/v2"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

const testDriver = "disk.fakecloud.dev"

// shortTempDir is a temp folder with a short path: a unix socket path must stay under 108
// bytes, which t.TempDir's test-named folders can exceed.
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "reg")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// registrationClient dials a registration socket as the kubelet's plugin watcher does.
func registrationClient(t *testing.T, sock string) registerapi.RegistrationClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return registerapi.NewRegistrationClient(conn)
}

// waitGone waits up to 5 s for path to disappear.
func waitGone(t *testing.T, path string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still exists after 5 s", path)
		}
	}
}

func TestSocketPath(t *testing.T) {
	if got, want := SocketPath("/registration", testDriver), "/registration/disk.fakecloud.dev-reg.sock"; got != want {
		t.Errorf("SocketPath = %q, want %q", got, want)
	}
}

// The kubelet's plugin watcher dials the socket, calls GetInfo, validates the answer and
// reports back with NotifyRegistrationStatus; this walks that path, a refusal first.
func TestServerKubeletHandshake(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sock := SocketPath(shortTempDir(t), testDriver)
	srv := NewServer(testDriver, "/var/lib/kubelet/plugins/disk.fakecloud.dev/csi.sock", klog.Background())
	stop, err := Serve(ctx, sock, srv)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if notified, _, _ := srv.Status(); notified || srv.Err() != nil {
		t.Fatalf("before the kubelet answers: notified=%v Err=%v, want false, nil", notified, srv.Err())
	}
	client := registrationClient(t, sock)
	info, err := client.GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil {
		t.Fatalf("GetInfo: %v", err)
	}
	if info.Type != registerapi.CSIPlugin || info.Name != testDriver || info.Endpoint != "/var/lib/kubelet/plugins/disk.fakecloud.dev/csi.sock" ||
		len(info.SupportedVersions) != 1 || info.SupportedVersions[0] != "1.0.0" {
		t.Errorf("GetInfo = %+v, want CSIPlugin %s at the kubelet's path supporting [1.0.0]", info, testDriver)
	}
	for _, tc := range []struct {
		status  *registerapi.RegistrationStatus
		want    bool
		wantErr bool
	}{
		{&registerapi.RegistrationStatus{PluginRegistered: false, Error: "bad version"}, false, true},
		{&registerapi.RegistrationStatus{PluginRegistered: true}, true, false},
	} {
		if _, err := client.NotifyRegistrationStatus(ctx, tc.status); err != nil {
			t.Fatalf("NotifyRegistrationStatus: %v", err)
		}
		notified, registered, lastErr := srv.Status()
		if !notified || registered != tc.want || lastErr != tc.status.Error || (srv.Err() != nil) != tc.wantErr {
			t.Errorf("after %+v: notified=%v registered=%v error=%q Err=%v, want true %v %q (error: %v)",
				tc.status, notified, registered, lastErr, srv.Err(), tc.want, tc.status.Error, tc.wantErr)
		}
	}
}

// A DaemonSet pod replacement: stop removes the socket (the kubelet then deregisters the
// plugin), a second stop is harmless, and the next server at the same path replaces a socket
// a killed process left behind. The context's end also removes the socket.
func TestServeStopRemovesSocketAndReplacesStaleOne(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sock := SocketPath(shortTempDir(t), testDriver)
	srv := NewServer(testDriver, "/csi/csi.sock", klog.Background())
	stop, err := Serve(ctx, sock, srv)
	if err != nil {
		t.Fatal(err)
	}
	stop()
	if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket after stop: expected it removed, stat says %v", err)
	}
	stop()

	// What a SIGKILLed registrar leaves: a socket file nobody listens on.
	stale, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	_ = stale.Close()
	if _, err := os.Stat(sock); err != nil {
		t.Fatalf("stale socket not left behind: %v", err)
	}
	if _, err := Serve(ctx, sock, srv); err != nil {
		t.Fatalf("serve over a stale socket: %v", err)
	}
	info, err := registrationClient(t, sock).GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil || info.Name != testDriver {
		t.Fatalf("GetInfo after serving again = %+v, %v; want %s", info, err, testDriver)
	}
	cancel()
	waitGone(t, sock)
}

// A path Serve cannot listen on is an error that names it, and leaves nothing behind.
func TestServeErrors(t *testing.T) {
	dir := shortTempDir(t)
	for name, sock := range map[string]string{
		"missing folder": filepath.Join(dir, "no-such-dir", "x-reg.sock"),
		"path too long":  filepath.Join(dir, strings.Repeat("x", 120)+"-reg.sock"),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Serve(context.Background(), sock, NewServer(testDriver, "/csi/csi.sock", klog.Background()))
			if err == nil {
				t.Fatalf("Serve(%s) = nil error", sock)
			}
		})
	}
}
