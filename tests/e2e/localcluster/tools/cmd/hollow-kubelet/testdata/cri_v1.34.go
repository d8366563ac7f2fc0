package main

import (
	"context"
	"time"

	internalapi "k8s.io/cri-api/pkg/apis"
	remote "k8s.io/cri-client/pkg"
	"k8s.io/klog/v2"
)

// newRuntimeService is cri.go's for Kubernetes v1.34 and v1.35, whose CRI client takes
// the endpoint, the timeout, a tracer provider and a logger.
func newRuntimeService(ctx context.Context, endpoint string) (internalapi.RuntimeService, error) {
	logger := klog.FromContext(ctx)
	return remote.NewRemoteRuntimeService(endpoint, 15*time.Second, nil, &logger)
}
