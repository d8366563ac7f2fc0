package main

import (
	"context"
	"time"

	internalapi "k8s.io/cri-api/pkg/apis"
	remote "k8s.io/cri-client/pkg"
)

// newRuntimeService is cri.go's for Kubernetes v1.36, whose CRI client has no builder
// yet: endpoint, timeout, tracer provider, streaming lists off (the builder's default).
func newRuntimeService(ctx context.Context, endpoint string) (internalapi.RuntimeService, error) {
	return remote.NewRemoteRuntimeService(ctx, endpoint, 15*time.Second, nil, false)
}
