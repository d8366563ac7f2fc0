package csi

import (
	"context"
	"sync/atomic"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Readiness tracks what the driver must have reached before Probe reports ready: the cloud
// (controller) and the node's topology (node). Each flag, once set, stays set. Safe for
// concurrent use.
type Readiness struct {
	needController, needNode bool
	controller, node         atomic.Bool
}

// NewReadiness returns a Readiness waiting for the parts a mode runs.
func NewReadiness(controller, node bool) *Readiness {
	return &Readiness{needController: controller, needNode: node}
}

// ControllerReady records that the cloud answered the controller.
func (r *Readiness) ControllerReady() { r.controller.Store(true) }

// NodeReady records that the node's topology is known.
func (r *Readiness) NodeReady() { r.node.Store(true) }

// Ready reports whether every needed part is ready.
func (r *Readiness) Ready() bool {
	return (!r.needController || r.controller.Load()) && (!r.needNode || r.node.Load())
}

// IdentityServer is the CSI identity service (CSI spec, "Identity Service RPC").
type IdentityServer struct {
	csi.UnimplementedIdentityServer
	version    string
	controller bool
	ready      *Readiness
}

var _ csi.IdentityServer = (*IdentityServer)(nil)

// NewIdentityServer returns the identity service. version is the vendor_version reported by
// GetPluginInfo; controller says whether CONTROLLER_SERVICE and GROUP_CONTROLLER_SERVICE
// (both served by a controller process) are advertised.
func NewIdentityServer(version string, controller bool, ready *Readiness) *IdentityServer {
	return &IdentityServer{version: version, controller: controller, ready: ready}
}

// GetPluginInfo returns the driver name disk.fakecloud.dev and its version.
func (s *IdentityServer) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	if s.version == "" {
		return nil, status.Error(codes.Unavailable, "driver version is not set")
	}
	return &csi.GetPluginInfoResponse{Name: DriverName, VendorVersion: s.version}, nil
}

// GetPluginCapabilities advertises the controller and group controller services (when this
// process runs them), topology (volumes are zonal) and online volume expansion.
func (s *IdentityServer) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	service := func(t csi.PluginCapability_Service_Type) *csi.PluginCapability {
		return &csi.PluginCapability{Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{Type: t}}}
	}
	caps := []*csi.PluginCapability{
		service(csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS),
		{Type: &csi.PluginCapability_VolumeExpansion_{VolumeExpansion: &csi.PluginCapability_VolumeExpansion{
			Type: csi.PluginCapability_VolumeExpansion_ONLINE,
		}}},
	}
	if s.controller {
		caps = append([]*csi.PluginCapability{service(csi.PluginCapability_Service_CONTROLLER_SERVICE),
			service(csi.PluginCapability_Service_GROUP_CONTROLLER_SERVICE)}, caps...)
	}
	return &csi.GetPluginCapabilitiesResponse{Capabilities: caps}, nil
}

// Probe reports ready once the cloud was reached (controller) and the node's zone is known
// (node). Not being ready is an answer (ready=false), not an error.
func (s *IdentityServer) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(s.ready.Ready())}, nil
}
