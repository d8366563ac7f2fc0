package localcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"

	"google.golang.org/grpc"
	"k8s.io/klog/v2"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// registrar is the kubelet plugin registration service
// (k8s.io/kubelet/pkg/apis/pluginregistration/v1) that node-driver-registrar
// serves in a real cluster: it tells one kubelet where a CSI driver's node
// socket is. It is served on a socket in the kubelet's
// <root>/plugins_registry/, which the kubelet's plugin watcher discovers.
type registrar struct {
	registerapi.UnimplementedRegistrationServer

	driverName string
	// endpoint is the absolute path of the driver's node CSI socket.
	endpoint string
	node     string

	mu         sync.Mutex
	registered bool
	lastError  string
}

var _ registerapi.RegistrationServer = (*registrar)(nil)

// GetInfo answers the kubelet's first call: a CSI plugin, its name, endpoint
// and versions.
func (r *registrar) GetInfo(ctx context.Context, _ *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	klog.FromContext(ctx).V(2).Info("Kubelet asked for plugin info", "node", r.node, "driver", r.driverName)
	return &registerapi.PluginInfo{
		Type:              registerapi.CSIPlugin,
		Name:              r.driverName,
		Endpoint:          r.endpoint,
		SupportedVersions: []string{"1.0.0"}, // the kubelet accepts major version 1 only
	}, nil
}

// NotifyRegistrationStatus records the kubelet's verdict; a failed
// registration is logged with the kubelet's reason (the kubelet retries).
func (r *registrar) NotifyRegistrationStatus(ctx context.Context, st *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	r.mu.Lock()
	r.registered, r.lastError = st.PluginRegistered, st.Error
	r.mu.Unlock()
	if !st.PluginRegistered {
		klog.ErrorS(errors.New(st.Error), "Kubelet refused the CSI plugin", "node", r.node, "driver", r.driverName)
	} else {
		klog.InfoS("Kubelet registered the CSI plugin", "node", r.node, "driver", r.driverName)
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}

// serveRegistration serves r on socketPath until ctx ends or the returned
// stop is called; it returns once the socket listens. stop closes the server
// and removes the socket before it returns, as node-driver-registrar does on
// SIGTERM (removeRegSocket), so that the kubelet's plugin watcher
// deregisters the plugin; it may be called more than once.
func serveRegistration(ctx context.Context, socketPath string, r *registrar) (stop func(), err error) {
	if err := os.Remove(socketPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale %s: %w", socketPath, err)
	}
	lis, err := net.Listen("unix", socketPath)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", socketPath, err)
	}
	srv := grpc.NewServer()
	registerapi.RegisterRegistrationServer(srv, r)
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := srv.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			klog.ErrorS(err, "Registration server stopped", "socket", socketPath)
		}
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			srv.Stop()
			<-served
			// Serve's listener unlinks the socket on close; this covers a
			// listener closed before Serve took it over.
			if err := os.Remove(socketPath); err != nil && !errors.Is(err, os.ErrNotExist) {
				klog.ErrorS(err, "Cannot remove the registration socket", "socket", socketPath)
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
