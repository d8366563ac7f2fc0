// Package kubeapitest serves a fake Kubernetes API server over HTTP for tests of kubeapi's
// users (the driver's cluster check, the fake cloud's console): GET, LIST and POST of Nodes,
// Pods, core Events, CSIDrivers, CSINodes, VolumeAttachments and events.k8s.io Events, and GET
// /version, answered from an in-memory store as JSON and Kubernetes Status errors. The code
// under test reaches it through its own client, on the wire as it reaches a real API server.
//
// It takes the place of client-go's fake clientset (k8s.io/client-go/kubernetes/fake), whose
// whole clientset would otherwise be built into every test binary of the main module. Like
// that fake, a test seeds objects (New, Put), reads them back (Get, List), counts the calls in
// Actions and turns a call into an answer of its own with PrependReactor; like it, lists
// ignore limit, continue and selectors (a test checks what the request asked in Actions).
//
// Tests only.
package kubeapitest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// DefaultServerVersion is the gitVersion GET /version answers until SetServerVersion.
const DefaultServerVersion = "v1.37.2"

// Action is one request the server got. Verb is "get", "list" or "create" (and "get" with
// Resource "version" for GET /version, as the fake clientset's discovery records it);
// Namespace is "" for cluster-scoped resources and lists of every namespace.
type Action struct {
	Verb     string
	Group    string // "" for the core group
	Resource string // plural, e.g. "csidrivers"
	// Namespace and Name of the object; Name is "" for list and create.
	Namespace, Name string
	// ListOptions are the query parameters of a list, decoded as an API server does.
	ListOptions metav1.ListOptions
}

// ReactionFunc answers a request instead of the store when handled is true: with obj (which
// the server encodes with its kind) or, when err is not nil, with err's Status (an error
// without one is an InternalError, 500).
type ReactionFunc func(a Action) (handled bool, obj runtime.Object, err error)

// Server is a fake API server; safe for concurrent use.
type Server struct {
	scheme *runtime.Scheme
	params runtime.ParameterCodec
	srv    *httptest.Server

	mu          sync.Mutex
	version     string
	objects     map[key]runtime.Object
	actions     []Action
	reactors    []reactor
	nextName    int // suffix of the last generated name
	lastReactor int // id of the last reactor added
}

type key struct {
	gv                        schema.GroupVersion
	resource, namespace, name string
}

type reactor struct {
	verb, resource string
	fn             ReactionFunc
	id             int
}

// served is one resource the server serves.
type served struct {
	gv         schema.GroupVersion
	resource   string
	kind       string
	namespaced bool
}

// resources are the resources the server serves.
func resources() []served {
	return []served{
		{corev1.SchemeGroupVersion, "nodes", "Node", false},
		{corev1.SchemeGroupVersion, "pods", "Pod", true},
		{corev1.SchemeGroupVersion, "events", "Event", true},
		{storagev1.SchemeGroupVersion, "csidrivers", "CSIDriver", false},
		{storagev1.SchemeGroupVersion, "csinodes", "CSINode", false},
		{storagev1.SchemeGroupVersion, "volumeattachments", "VolumeAttachment", false},
		{eventsv1.SchemeGroupVersion, "events", "Event", true},
	}
}

// New starts a server holding objs (closed when t ends). Errors fail t: an object of a kind
// the server does not serve, two of the same name.
func New(t testing.TB, objs ...runtime.Object) *Server {
	t.Helper()
	s := &Server{scheme: runtime.NewScheme(), version: DefaultServerVersion, objects: map[key]runtime.Object{}}
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, storagev1.AddToScheme, eventsv1.AddToScheme} {
		if err := add(s.scheme); err != nil {
			t.Fatalf("kubeapitest scheme: %v", err)
		}
	}
	metav1.AddToGroupVersion(s.scheme, schema.GroupVersion{Version: "v1"})
	s.params = runtime.NewParameterCodec(s.scheme)
	for _, o := range objs {
		k, err := s.keyOf(o)
		if err != nil {
			t.Fatalf("kubeapitest: %v", err)
		}
		if _, dup := s.objects[k]; dup {
			t.Fatalf("kubeapitest: two objects %s %s/%s", k.resource, k.namespace, k.name)
		}
		s.objects[k] = o.DeepCopyObject()
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

// Config is the server's client configuration: plain HTTP, no credentials, and no client-side
// rate limit (QPS -1), so that tests retrying at millisecond intervals are not throttled.
func (s *Server) Config() *rest.Config { return &rest.Config{Host: s.srv.URL, QPS: -1} }

// SetServerVersion sets the gitVersion GET /version answers, e.g. "v1.34.4".
func (s *Server) SetServerVersion(gitVersion string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.version = gitVersion
}

// Put stores a copy of obj, replacing the object of its name (as an update does); it records
// no Action. Errors: obj's kind is not served.
func (s *Server) Put(obj runtime.Object) error {
	k, err := s.keyOf(obj)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.objects[k] = obj.DeepCopyObject()
	return nil
}

// Get returns a copy of the stored object of out's kind named namespace/name into out
// (a pointer to a served type) and whether it exists; it records no Action.
func (s *Server) Get(namespace, name string, out runtime.Object) bool {
	k, err := s.keyOf(out)
	if err != nil {
		return false
	}
	k.namespace, k.name = namespace, name
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.objects[k]
	if !ok {
		return false
	}
	dst := reflect.ValueOf(out)
	src := reflect.ValueOf(o.DeepCopyObject())
	if dst.Kind() != reflect.Pointer || src.Type() != dst.Type() {
		return false
	}
	dst.Elem().Set(src.Elem())
	return true
}

// List returns copies of the stored objects of resource in group version gv (every
// namespace's), sorted by namespace and name; it records no Action.
func (s *Server) List(gv schema.GroupVersion, resource string) []runtime.Object {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.list(gv, resource, "")
}

// Actions returns the requests so far, oldest first.
func (s *Server) Actions() []Action {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.actions)
}

// ClearActions forgets the requests so far.
func (s *Server) ClearActions() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.actions = nil
}

// PrependReactor makes fn answer requests of verb ("get", "list", "create"; "*" any) on
// resource ("*" any; "version" is GET /version) before the store and the reactors added
// before it. remove takes it away again.
func (s *Server) PrependReactor(verb, resource string, fn ReactionFunc) (remove func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastReactor++
	id := s.lastReactor
	s.reactors = append([]reactor{{verb: verb, resource: resource, fn: fn, id: id}}, s.reactors...)
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.reactors = slices.DeleteFunc(s.reactors, func(r reactor) bool { return r.id == id })
	}
}

// keyOf is the store's key of obj. Errors: a kind the server does not serve.
func (s *Server) keyOf(obj runtime.Object) (key, error) {
	gvks, _, err := s.scheme.ObjectKinds(obj)
	if err != nil {
		return key{}, err
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return key{}, err
	}
	for _, r := range resources() {
		if r.gv == gvks[0].GroupVersion() && r.kind == gvks[0].Kind {
			k := key{gv: r.gv, resource: r.resource, name: m.GetName()}
			if r.namespaced {
				k.namespace = m.GetNamespace()
			}
			return k, nil
		}
	}
	return key{}, fmt.Errorf("kind %s is not served", gvks[0])
}

// list is the objects of resource in namespace ("" all), sorted; s.mu held.
func (s *Server) list(gv schema.GroupVersion, resource, namespace string) []runtime.Object {
	var keys []key
	for k := range s.objects {
		if k.gv == gv && k.resource == resource && (namespace == "" || k.namespace == namespace) {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b key) int {
		return strings.Compare(a.namespace+"/"+a.name, b.namespace+"/"+b.name)
	})
	out := make([]runtime.Object, 0, len(keys))
	for _, k := range keys {
		out = append(out, s.objects[k].DeepCopyObject())
	}
	return out
}

// serve answers one request: GET /version, or GET, LIST or POST of a served resource under
// /api/v1 or /apis/GROUP/VERSION, optionally in namespaces/NS. Other paths answer 404, other
// methods 405, as Status objects.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/version" && r.Method == http.MethodGet {
		s.serveVersion(w)
		return
	}
	a, gv, ok := parsePath(r.URL.Path)
	if !ok {
		s.writeError(w, apierrors.NewNotFound(schema.GroupResource{}, r.URL.Path))
		return
	}
	switch {
	case r.Method == http.MethodGet && a.Name != "":
		a.Verb = "get"
	case r.Method == http.MethodGet:
		a.Verb = "list"
		if err := s.params.DecodeParameters(r.URL.Query(), schema.GroupVersion{Version: "v1"}, &a.ListOptions); err != nil {
			s.writeError(w, apierrors.NewBadRequest(fmt.Sprintf("list options %s: %v", r.URL.RawQuery, err)))
			return
		}
	case r.Method == http.MethodPost && a.Name == "":
		a.Verb = "create"
	default:
		s.writeError(w, apierrors.NewMethodNotSupported(schema.GroupResource{Group: a.Group, Resource: a.Resource}, r.Method))
		return
	}
	var body []byte
	if a.Verb == "create" {
		var err error
		if body, err = io.ReadAll(io.LimitReader(r.Body, 1<<20)); err != nil {
			s.writeError(w, apierrors.NewBadRequest(err.Error()))
			return
		}
	}
	obj, err := s.do(a, gv, body)
	if err != nil {
		s.writeError(w, err)
		return
	}
	code := http.StatusOK
	if a.Verb == "create" {
		code = http.StatusCreated
	}
	s.write(w, code, obj)
}

// do records a, runs the reactors and else the store.
func (s *Server) do(a Action, gv schema.GroupVersion, body []byte) (runtime.Object, error) {
	s.mu.Lock()
	s.actions = append(s.actions, a)
	reactors := slices.Clone(s.reactors)
	s.mu.Unlock()
	// Outside the lock: a reactor may block (a server that does not answer) or call the Server.
	for _, r := range reactors {
		if (r.verb == "*" || r.verb == a.Verb) && (r.resource == "*" || r.resource == a.Resource) {
			if handled, obj, err := r.fn(a); handled {
				return obj, err
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	gr := schema.GroupResource{Group: a.Group, Resource: a.Resource}
	var kind string
	for _, res := range resources() {
		if res.gv == gv && res.resource == a.Resource {
			kind = res.kind
		}
	}
	switch a.Verb {
	case "get":
		o, ok := s.objects[key{gv: gv, resource: a.Resource, namespace: a.Namespace, name: a.Name}]
		if !ok {
			return nil, apierrors.NewNotFound(gr, a.Name)
		}
		return o.DeepCopyObject(), nil
	case "list":
		return s.listObject(gv, kind, s.list(gv, a.Resource, a.Namespace))
	default: // create
		o, err := s.scheme.New(gv.WithKind(kind))
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		if err := json.Unmarshal(body, o); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("decode %s: %v", kind, err))
		}
		m, _ := meta.Accessor(o)
		if m.GetName() == "" && m.GetGenerateName() != "" {
			s.nextName++
			m.SetName(fmt.Sprintf("%s%05d", m.GetGenerateName(), s.nextName))
		}
		if m.GetName() == "" {
			return nil, apierrors.NewInvalid(gv.WithKind(kind).GroupKind(), "", nil)
		}
		if m.GetNamespace() == "" {
			m.SetNamespace(a.Namespace)
		}
		k := key{gv: gv, resource: a.Resource, namespace: a.Namespace, name: m.GetName()}
		if _, dup := s.objects[k]; dup {
			return nil, apierrors.NewAlreadyExists(gr, m.GetName())
		}
		s.objects[k] = o
		return o.DeepCopyObject(), nil
	}
}

// listObject is objs in a list of kind's list type.
func (s *Server) listObject(gv schema.GroupVersion, kind string, objs []runtime.Object) (runtime.Object, error) {
	l, err := s.scheme.New(gv.WithKind(kind + "List"))
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	if err := meta.SetList(l, objs); err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return l, nil
}

// parsePath reads /api/v1/[namespaces/NS/]RESOURCE[/NAME] and
// /apis/GROUP/VERSION/[namespaces/NS/]RESOURCE[/NAME] of a served resource.
func parsePath(p string) (a Action, gv schema.GroupVersion, ok bool) {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	switch {
	case len(parts) >= 3 && parts[0] == "api" && parts[1] == "v1":
		gv, parts = corev1.SchemeGroupVersion, parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		gv, parts = schema.GroupVersion{Group: parts[1], Version: parts[2]}, parts[3:]
	default:
		return a, gv, false
	}
	a.Group = gv.Group
	if len(parts) >= 3 && parts[0] == "namespaces" {
		a.Namespace, parts = parts[1], parts[2:]
	}
	switch len(parts) {
	case 1:
		a.Resource = parts[0]
	case 2:
		a.Resource, a.Name = parts[0], parts[1]
	default:
		return a, gv, false
	}
	for _, r := range resources() {
		if r.gv == gv && r.resource == a.Resource && r.namespaced == (a.Namespace != "") {
			return a, gv, true
		}
		// Every namespace's list of a namespaced resource.
		if r.gv == gv && r.resource == a.Resource && r.namespaced && a.Namespace == "" && a.Name == "" {
			return a, gv, true
		}
	}
	return a, gv, false
}

func (s *Server) serveVersion(w http.ResponseWriter) {
	a := Action{Verb: "get", Resource: "version"}
	s.mu.Lock()
	s.actions = append(s.actions, a)
	reactors := slices.Clone(s.reactors)
	v := s.version
	s.mu.Unlock()
	for _, r := range reactors {
		if (r.verb == "*" || r.verb == "get") && (r.resource == "*" || r.resource == "version") {
			if handled, _, err := r.fn(a); handled && err != nil {
				s.writeError(w, err)
				return
			}
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{"gitVersion": v})
}

// writeError answers err as the API server does: its Status (an internal error's for an
// error that carries none), with the Status's code.
func (s *Server) writeError(w http.ResponseWriter, err error) {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		st = apierrors.NewInternalError(err)
	}
	status := st.Status()
	status.Kind, status.APIVersion = "Status", "v1"
	s.writeJSON(w, int(status.Code), &status)
}

// write answers obj with its kind set.
func (s *Server) write(w http.ResponseWriter, code int, obj runtime.Object) {
	if obj == nil {
		s.writeError(w, errors.New("a reactor answered no object"))
		return
	}
	gvks, _, err := s.scheme.ObjectKinds(obj)
	if err != nil {
		s.writeError(w, err)
		return
	}
	obj = obj.DeepCopyObject()
	obj.GetObjectKind().SetGroupVersionKind(gvks[0])
	s.writeJSON(w, code, obj)
}

func (s *Server) writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
