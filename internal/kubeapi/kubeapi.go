// Package kubeapi is a small typed Kubernetes API client: GET, LIST and CREATE of the few kinds
// a caller registers, plus the API server's version, over client-go's REST client
// (k8s.io/client-go/rest) and JSON.
//
// Not client-go's clientset (k8s.io/client-go/kubernetes): its scheme registers every API
// group of Kubernetes when the program starts and it links a typed client, lister and apply
// configuration of each, about 28 MB of a binary and 15 MB of its idle resident memory for
// the handful of calls the driver's cluster check and the fake cloud's console make (issues
// 25 and 28; docs/figures.md). TestBinariesLinkNoClientset (links_test.go) keeps the clientset
// out of both binaries. The requests are the ones the clientset makes (same paths, verbs, query
// parameters, user agent, rate limiter and timeout from the rest.Config), and errors are the
// same *errors.StatusError values (apierrors.IsNotFound etc. work on them).
//
// kubeapitest serves a fake API server for tests of its users.
package kubeapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// Client reads and creates objects of the API groups it was made with; safe for concurrent
// use. Each method names the resource (its plural, e.g. "nodes") and takes or fills a typed
// object whose Go type says the group and version (e.g. *storagev1.CSIDriver:
// /apis/storage.k8s.io/v1).
type Client struct {
	scheme *runtime.Scheme
	// groups holds one REST client per group version of the scheme; all share one HTTP
	// client (connections) and, with rest.Config's QPS set, one rate limiter.
	groups map[schema.GroupVersion]rest.Interface
	// core serves paths outside the groups (GET /version).
	core rest.Interface
}

// New returns a Client for the cluster rc describes (e.g. from clientcmd.BuildConfigFromFlags
// or rest.InClusterConfig) that knows the API groups addToScheme register, e.g.
// corev1.AddToScheme and storagev1.AddToScheme. Like client-go's clientset it shares one HTTP
// client and one rate limiter (rc.QPS, rc.Burst) between the groups, keeps rc.Timeout per
// request and sets rest.DefaultKubernetesUserAgent when rc has no user agent. It connects to
// nothing yet; it reads the files rc names (client certificates, CA), as the clientset does.
// Errors: a scheme function fails, rc cannot make an HTTP client.
func New(rc *rest.Config, addToScheme ...func(*runtime.Scheme) error) (*Client, error) {
	scheme := runtime.NewScheme()
	for _, add := range addToScheme {
		if err := add(scheme); err != nil {
			return nil, fmt.Errorf("kubernetes client scheme: %w", err)
		}
	}
	// metav1's Status (an API server's error answers) and options in the unversioned group,
	// as client-go's own scheme registers them.
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	codecs := serializer.NewCodecFactory(scheme)

	cfg := rest.CopyConfig(rc)
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	if cfg.RateLimiter == nil && cfg.QPS > 0 {
		if cfg.Burst <= 0 {
			return nil, errors.New("kubernetes client: burst must be > 0 when QPS is set without a rate limiter")
		}
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, cfg.Burst)
	}
	cfg.NegotiatedSerializer = codecs.WithoutConversion()
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	client := func(gv schema.GroupVersion) (rest.Interface, error) {
		c := *cfg
		c.APIPath = "/apis"
		if gv.Group == "" {
			c.APIPath = "/api"
		}
		c.GroupVersion = &gv
		gc, err := rest.RESTClientForConfigAndClient(&c, httpClient)
		if err != nil {
			return nil, fmt.Errorf("kubernetes client for %s: %w", gv, err)
		}
		return gc, nil
	}
	k := &Client{scheme: scheme, groups: map[schema.GroupVersion]rest.Interface{}}
	for _, gv := range scheme.PrioritizedVersionsAllGroups() {
		if k.groups[gv], err = client(gv); err != nil {
			return nil, err
		}
	}
	if k.core, err = client(schema.GroupVersion{Version: "v1"}); err != nil {
		return nil, err
	}
	return k, nil
}

// group is the REST client of obj's group version. Errors: obj's type is not registered.
func (k *Client) group(obj runtime.Object) (rest.Interface, error) {
	gvks, _, err := k.scheme.ObjectKinds(obj)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	c, ok := k.groups[gvks[0].GroupVersion()]
	if !ok {
		return nil, fmt.Errorf("kubernetes client: no API group %s registered for %T", gvks[0].GroupVersion(), obj)
	}
	return c, nil
}

// Get reads the object name of resource into out (GET .../[namespaces/namespace/]resource/name;
// namespace "" for cluster-scoped resources). Errors: the API server's (a *StatusError, e.g.
// NotFound, Forbidden), transport errors, ctx's.
func (k *Client) Get(ctx context.Context, resource, namespace, name string, out runtime.Object) error {
	c, err := k.group(out)
	if err != nil {
		return err
	}
	return c.Get().NamespaceIfScoped(namespace, namespace != "").Resource(resource).Name(name).Do(ctx).Into(out)
}

// List reads one page of resource into out, a list type (GET .../[namespaces/namespace/]resource,
// namespace "" for every namespace's or a cluster-scoped resource), with opts as query
// parameters (limit, continue, selectors). Errors as Get's.
func (k *Client) List(ctx context.Context, resource, namespace string, opts metav1.ListOptions, out runtime.Object) error {
	c, err := k.group(out)
	if err != nil {
		return err
	}
	return c.Get().NamespaceIfScoped(namespace, namespace != "").Resource(resource).VersionedParams(&opts, metav1.ParameterCodec).Do(ctx).Into(out)
}

// Create creates obj in resource (POST .../[namespaces/namespace/]resource) and reads the
// stored object, as the API server answers it, into out (which may be obj). Errors as Get's,
// e.g. AlreadyExists, Invalid.
func (k *Client) Create(ctx context.Context, resource, namespace string, obj, out runtime.Object) error {
	c, err := k.group(obj)
	if err != nil {
		return err
	}
	return c.Post().NamespaceIfScoped(namespace, namespace != "").Resource(resource).Body(obj).Do(ctx).Into(out)
}

// ServerVersion reads the API server's version (GET /version), as the clientset's discovery
// client does. Errors as Get's, or an answer that is not a version.
func (k *Client) ServerVersion(ctx context.Context) (*version.Info, error) {
	body, err := k.core.Get().AbsPath("/version").Do(ctx).Raw()
	if err != nil {
		return nil, err
	}
	var info version.Info
	if err := json.Unmarshal(body, &info); err != nil {
		return nil, fmt.Errorf("unable to parse the server version: %w", err)
	}
	return &info, nil
}
