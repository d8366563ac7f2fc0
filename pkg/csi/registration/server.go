// Package registration is the kubelet side of a CSI node plugin's start: the kubelet plugin
// registration service (k8s.io/kubelet/pkg/apis/pluginregistration/v1) that tells one kubelet
// where a CSI driver's node socket is. It is what node-driver-registrar does in a cluster, in
// a form this project builds from the Go module proxy alone: the driver binary's `registrar`
// subcommand runs it in the node DaemonSet of the offline kind overlay, and the e2e local
// cluster serves it for its hollow kubelets.
//
// The kubelet's plugin watcher discovers a socket in its <root>/plugins_registry/, calls
// GetInfo, validates the answer, registers the driver (it dials the endpoint and calls
// NodeGetInfo) and reports back with NotifyRegistrationStatus. Removing the socket makes the
// kubelet deregister the driver.
package registration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"

	"google.golang.org/grpc"
	"k8s.io/klog/v2"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// SupportedVersion is the one CSI plugin registration version the server announces: the
// kubelet accepts major version 1 only.
const SupportedVersion = "1.0.0"

// SocketPath is where a driver's registration socket lives in the kubelet's plugin
// registration folder dir: <dir>/<driverName>-reg.sock, the name node-driver-registrar uses.
func SocketPath(dir, driverName string) string {
	return filepath.Join(dir, driverName+"-reg.sock")
}

// Server answers the kubelet's plugin registration calls for one CSI driver and remembers
// the kubelet's last verdict. It is safe for concurrent use.
type Server struct {
	registerapi.UnimplementedRegistrationServer

	driverName string
	// endpoint is the driver's node CSI socket as the kubelet sees it (an absolute path).
	endpoint string
	log      klog.Logger

	mu sync.Mutex
	// notified is true once the kubelet reported a status; registered and lastError are
	// that status.
	notified, registered bool
	lastError            string
}

var _ registerapi.RegistrationServer = (*Server)(nil)

// NewServer returns a Server for driverName whose CSI socket the kubelet finds at endpoint.
// log receives the kubelet's calls and verdicts (add key/values such as the node to it).
func NewServer(driverName, endpoint string, log klog.Logger) *Server {
	return &Server{driverName: driverName, endpoint: endpoint, log: klog.LoggerWithValues(log, "driver", driverName)}
}

// DriverName is the CSI driver name the server announces.
func (s *Server) DriverName() string { return s.driverName }

// GetInfo answers the kubelet's first call: a CSI plugin, its name, endpoint and versions.
func (s *Server) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	s.log.V(2).Info("Kubelet asked for plugin info", "endpoint", s.endpoint)
	return &registerapi.PluginInfo{
		Type:              registerapi.CSIPlugin,
		Name:              s.driverName,
		Endpoint:          s.endpoint,
		SupportedVersions: []string{SupportedVersion},
	}, nil
}

// NotifyRegistrationStatus records the kubelet's verdict; a refused registration is logged
// with the kubelet's reason (the kubelet retries when the socket is served again).
func (s *Server) NotifyRegistrationStatus(_ context.Context, st *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	s.mu.Lock()
	s.notified, s.registered, s.lastError = true, st.PluginRegistered, st.Error
	s.mu.Unlock()
	if st.PluginRegistered {
		s.log.Info("Kubelet registered the CSI plugin")
	} else {
		s.log.Error(errors.New(st.Error), "Kubelet refused the CSI plugin")
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}

// Status is the kubelet's last verdict: notified is false until the kubelet called
// NotifyRegistrationStatus; then registered says whether it took the plugin and lastError is
// its reason when not.
func (s *Server) Status() (notified, registered bool, lastError string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.notified, s.registered, s.lastError
}

// Err is nil unless the kubelet's last verdict refused the plugin; then it carries the
// kubelet's reason. A plugin the kubelet has not answered yet is not an error: the kubelet's
// plugin watcher may simply not have seen the socket yet.
func (s *Server) Err() error {
	notified, registered, lastError := s.Status()
	if notified && !registered {
		return fmt.Errorf("kubelet refused the registration of %s: %s", s.driverName, lastError)
	}
	return nil
}

// Serve serves s on the unix socket socketPath until ctx ends or the returned stop is called;
// it returns once the socket listens. A socket left behind by an earlier process is removed
// first. stop closes the server and removes the socket before it returns, as
// node-driver-registrar does on SIGTERM, so that the kubelet's plugin watcher deregisters the
// plugin; it may be called more than once and from several goroutines.
func Serve(ctx context.Context, socketPath string, s *Server) (stop func(), err error) {
	if err := os.Remove(socketPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale registration socket %s: %w", socketPath, err)
	}
	lis, err := net.Listen("unix", socketPath)
	if err != nil {
		return nil, fmt.Errorf("listen on registration socket %s: %w", socketPath, err)
	}
	srv := grpc.NewServer()
	registerapi.RegisterRegistrationServer(srv, s)
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := srv.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			s.log.Error(err, "Registration server stopped", "socket", socketPath)
		}
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			srv.Stop()
			<-served
			// Serve's listener unlinks the socket on close; this covers a listener closed
			// before Serve took it over.
			if err := os.Remove(socketPath); err != nil && !errors.Is(err, os.ErrNotExist) {
				s.log.Error(err, "Cannot remove the registration socket", "socket", socketPath)
			}
		})
	}
	go func() {
		select {
		case <-ctx.Done():
			stop()
		case <-served:
		}
	}()
	return stop, nil
}
