// Package kind is the module of the kind tooling of fakecloud-csi: cmd/kindctl builds the
// driver and fake cloud images without a Docker daemon, renders and applies deploy/base and its
// overlays (deploy/kind), waits for them to roll out, fetches the external-snapshotter release
// that matches the csi-snapshotter sidecar, and checks a deployed driver end to end (kindctl
// check, internal/smoke); cmd/podnet is the pod network (CNI conflist and routes) that runs in
// every node of the offline kind node image. It is its own module so that client-go, kustomize and
// go-containerregistry never enter the main module's go.mod.
package kind
