package main

import (
	"context"
	"time"

	internalapi "k8s.io/cri-api/pkg/apis"
	remote "k8s.io/cri-client/pkg"
)

// newRuntimeService connects the kubelet's CRI client to the fake runtime at endpoint
// (unix://...), waiting at most 15 s. The CRI client's constructor changed between
// Kubernetes minors: this file is v1.37's; testdata/cri_v1.<minor>.go holds the older
// ones, and the harness builds a hollow kubelet of another version with the file of
// its minor instead of this one (see localcluster's versioned tools modules).
func newRuntimeService(ctx context.Context, endpoint string) (internalapi.RuntimeService, error) {
	return remote.NewRemoteRuntimeServiceBuilder().
		WithEndpoint(endpoint).
		WithConnectionTimeout(15 * time.Second).
		Build(ctx)
}
