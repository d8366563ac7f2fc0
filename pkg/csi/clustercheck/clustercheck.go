// Package clustercheck decides, once at node plugin start, whether the Kubernetes cluster can
// take run-time updates of CSINode.spec.drivers[].allocatable.count (KEP-4876, Mutable CSINode
// Allocatable). Three things must hold: the API server is v1.35 or newer (the
// MutableCSINodeAllocatableCount feature gate is beta and on by default in 1.35, GA and locked
// on in 1.36), the CSIDriver object sets spec.nodeAllocatableUpdatePeriodSeconds (without it the
// kubelet never calls NodeGetInfo again after registration; an API server whose gate is off
// drops the field, so a missing field also catches that), and the node's kubelet is v1.35 or
// newer (it is the kubelet that refreshes CSINode).
//
// The driver cannot read feature gates. On v1.33 and v1.34, where the gate exists but is off
// by default, only the operator knows it was turned on by hand: the Node label
// Checker.ModeLabel=true is that word, and it turns those versions' problems into notes when
// nothing else is wrong (the CSIDriver's period read back, which also says the API server
// stored the field). Older versions have no gate and are never overridden. Decide records the
// outcome with its evidence as a Decision (decision.go; docs/compatibility.md has the table).
//
// Where they do not hold, the node plugin reports a static count instead of the capacity
// policy (pkg/csi/capacity.Static): such a kubelet reads max_volumes_per_node only at
// registration, and a value that depended on the attachments of that moment would stay wrong
// for the node's life.
//
// Decide (decide.go) is that start-up step as cmd/driver calls it: it runs the check (Check,
// retried by CheckUntil), reads the per-node label, reports a fallback (Report) and returns
// the node plugin's Mode, with a Watch that re-checks while the plugin runs. It is the only
// part of a driver's start-up that waits on the Kubernetes API server.
package clustercheck

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/fakecloud/fakecloud-csi/internal/kubeapi"
)

// MinMajor.MinMinor is the oldest API server and kubelet that take allocatable updates with
// their default feature gates: v1.35, where MutableCSINodeAllocatableCount became on by
// default (KEP-4876; beta in 1.35, GA in 1.36).
const (
	MinMajor = 1
	MinMinor = 35
)

// requestTimeout bounds one API request of the check.
const requestTimeout = 10 * time.Second

// EventReason is the reason of the Warning Event Report creates.
const EventReason = "DynamicCapacityUnsupported"

// Result is what Check found. Supported is true only when Problems is empty.
type Result struct {
	// Supported: the cluster takes allocatable updates from this node's kubelet.
	Supported bool
	// ServerVersion is the API server's gitVersion, e.g. "v1.37.2".
	ServerVersion string
	// KubeletVersion is the node's status.nodeInfo.kubeletVersion; empty when no node name
	// was given.
	KubeletVersion string
	// PeriodSeconds is the CSIDriver's spec.nodeAllocatableUpdatePeriodSeconds; nil when unset
	// or when the CSIDriver does not exist.
	PeriodSeconds *int64
	// ModeLabel is the value of the Node's Checker.ModeLabel label, ModeLabelSet whether the
	// Node has it at all; both unset when no node name was given.
	ModeLabel    string
	ModeLabelSet bool
	// CSIDriverUID is the UID of the CSIDriver object, empty when it does not exist; Report
	// uses it so that `kubectl describe csidriver` lists the Event.
	CSIDriverUID string
	// Problems says, one sentence each, why updates cannot reach the scheduler.
	Problems []string
	// ProblemReasons holds the Reason of each of Problems, in the same order.
	ProblemReasons []Reason
	// Overridden are the problems the Node label ModeLabel=true turned into notes: the
	// MutableCSINodeAllocatableCount gate off by default on a v1.33/v1.34 API server or
	// kubelet, which the operator says was turned on by hand. Supported may be true with them.
	Overridden []string
	// ServerGate and KubeletGate are what the API server's and the kubelet's minor versions
	// imply for the gate (a GateState); "" when not read.
	ServerGate  GateState
	KubeletGate GateState
	// KubeletMinor is the kubelet's minor version, 0 when not read.
	KubeletMinor int
	// AttacherErrorCode says whether a VolumeAttachment of this driver carried
	// status.attachError.errorCode, i.e. whether the external-attacher writes it.
	AttacherErrorCode AttacherEvidence
}

// Checker reads the cluster through Client (NewClient's). DriverName is the CSIDriver object's name (the CSI
// driver name); NodeName is this node's Kubernetes name, empty to skip the kubelet check and
// the label; ModeLabel is the key of a Node label whose value Check returns (the per-node
// dynamic capacity switch), empty for none; NodeID names the reporting instance in Events.
type Checker struct {
	Client     *kubeapi.Client
	DriverName string
	NodeName   string
	ModeLabel  string
	NodeID     string
}

// Check reads the API server version (GET /version), the CSIDriver object and, with NodeName,
// the Node object, and returns what they say. An absent CSIDriver is a problem, not an error.
// Errors: the API server cannot be reached or refuses a read (e.g. RBAC forbids get on
// csidrivers or nodes), the Node does not exist, a version cannot be parsed; the Result is
// then not meaningful.
func (c Checker) Check(ctx context.Context) (Result, error) {
	var res Result
	// With the context: a server that accepts the connection and never answers must not hold
	// the node plugin's start past the check's deadline.
	info, err := c.Client.ServerVersion(ctx)
	if err != nil {
		return res, fmt.Errorf("read the API server version: %w", err)
	}
	res.ServerVersion = info.GitVersion
	sv, err := parseVersion("API server", info.GitVersion)
	if err != nil {
		return res, err
	}
	res.ServerGate = gateAt(sv)
	res.addGateProblem("API server", info.GitVersion, res.ServerGate, ReasonAPIServerTooOld, ReasonAPIServerGateOffByDefault)

	d := &storagev1.CSIDriver{}
	err = c.Client.Get(ctx, "csidrivers", "", c.DriverName, d)
	switch {
	case apierrors.IsNotFound(err):
		res.addProblem(ReasonCSIDriverMissing, fmt.Sprintf("the CSIDriver object %s does not exist", c.DriverName))
	case err != nil:
		return res, fmt.Errorf("read CSIDriver %s: %w", c.DriverName, err)
	default:
		res.CSIDriverUID = string(d.UID)
		res.PeriodSeconds = d.Spec.NodeAllocatableUpdatePeriodSeconds
		if res.PeriodSeconds == nil {
			res.addProblem(ReasonPeriodUnset, fmt.Sprintf(
				"CSIDriver %s does not set spec.nodeAllocatableUpdatePeriodSeconds (or the API server's MutableCSINodeAllocatableCount gate is off and dropped it)", c.DriverName))
		}
	}

	if c.NodeName != "" {
		n := &corev1.Node{}
		if err := c.Client.Get(ctx, "nodes", "", c.NodeName, n); err != nil {
			return res, fmt.Errorf("read Node %s: %w", c.NodeName, err)
		}
		res.KubeletVersion = n.Status.NodeInfo.KubeletVersion
		if c.ModeLabel != "" {
			res.ModeLabel, res.ModeLabelSet = n.Labels[c.ModeLabel]
		}
		kv, err := parseVersion("kubelet of "+c.NodeName, res.KubeletVersion)
		if err != nil {
			return res, err
		}
		res.KubeletGate, res.KubeletMinor = gateAt(kv), int(kv.Minor())
		res.addGateProblem("kubelet of "+c.NodeName, res.KubeletVersion, res.KubeletGate, ReasonKubeletTooOld, ReasonKubeletGateOffByDefault)
	}
	res.AttacherErrorCode = c.attacherEvidence(ctx)
	res.applyLabelOverride()
	res.Supported = len(res.Problems) == 0
	return res, nil
}

// vaListLimit bounds the VolumeAttachments one check reads (one page).
const vaListLimit = 500

// attacherEvidence reads up to vaListLimit VolumeAttachments and says whether one of this
// driver's carried status.attachError.errorCode. It is evidence only: a failed read is
// AttacherUnknown, never an error of the check (the node plugin's RBAC may not grant list).
func (c Checker) attacherEvidence(ctx context.Context) AttacherEvidence {
	l := &storagev1.VolumeAttachmentList{}
	if err := c.Client.List(ctx, "volumeattachments", "", metav1.ListOptions{Limit: vaListLimit}, l); err != nil {
		klog.FromContext(ctx).V(4).Info("Cannot list VolumeAttachments; whether the attacher writes errorCode stays unknown", "err", err)
		return AttacherUnknown
	}
	for i := range l.Items {
		va := &l.Items[i]
		if va.Spec.Attacher == c.DriverName && va.Status.AttachError != nil && va.Status.AttachError.ErrorCode != nil {
			return AttacherWritesErrorCode
		}
	}
	return AttacherNoErrorCodeSeen
}

// addProblem appends one problem and its reason.
func (r *Result) addProblem(reason Reason, sentence string) {
	r.Problems = append(r.Problems, sentence)
	r.ProblemReasons = append(r.ProblemReasons, reason)
}

// addGateProblem appends the problem of a component whose version implies gate: too old
// (no gate) or the gate off by default.
func (r *Result) addGateProblem(what, gitVersion string, gate GateState, tooOld, offByDefault Reason) {
	minimum := version.MajorMinor(MinMajor, MinMinor)
	switch gate {
	case GateAbsent:
		r.addProblem(tooOld, fmt.Sprintf("the %s is %s, older than v%s", what, gitVersion, minimum))
	case GateOffByDefault:
		r.addProblem(offByDefault, fmt.Sprintf("the %s is %s, older than v%s (its MutableCSINodeAllocatableCount gate is off unless turned on by hand; "+
			"label the Node true to say it is on)", what, gitVersion, minimum))
	}
}

// applyLabelOverride moves the gate-off-by-default problems to Overridden when the Node's
// label is "true" and they are the only problems: the operator's word that the gate was
// turned on by hand, which the driver cannot read.
func (r *Result) applyLabelOverride() {
	if !r.ModeLabelSet || r.ModeLabel != "true" || len(r.Problems) == 0 {
		return
	}
	for _, reason := range r.ProblemReasons {
		if reason != ReasonAPIServerGateOffByDefault && reason != ReasonKubeletGateOffByDefault {
			return
		}
	}
	r.Overridden, r.Problems, r.ProblemReasons = r.Problems, nil, nil
}

// parseVersion parses a gitVersion such as "v1.36.4-gke.1200".
func parseVersion(what, gitVersion string) (*version.Version, error) {
	v, err := version.ParseGeneric(gitVersion)
	if err != nil {
		return nil, fmt.Errorf("parse the %s version %q: %w", what, gitVersion, err)
	}
	return v, nil
}

// Report creates a Warning Event (events.k8s.io/v1, namespace "default", as for any
// cluster-scoped object) regarding the CSIDriver object, reason EventReason, whose note lists
// res.Problems and names this node, so that `kubectl describe csidriver` and `kubectl events`
// show why the node plugin reports a static count. Errors: the API server refuses the create
// (RBAC needs create on events.k8s.io events).
func (c Checker) Report(ctx context.Context, res Result) error {
	note := fmt.Sprintf("the node plugin of %s reports a static max_volumes_per_node: %s", c.NodeID, strings.Join(res.Problems, "; "))
	if len(note) > 1024 { // the API's limit for a note
		note = note[:1021] + "..."
	}
	now := time.Now()
	ev := &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: c.DriverName + "-", Namespace: metav1.NamespaceDefault},
		EventTime:  metav1.NewMicroTime(now),
		// The kubelet's plugin manager is "the controller" in Kubernetes' terms; this is ours.
		ReportingController: c.DriverName + "/node",
		ReportingInstance:   c.DriverName + "-" + c.NodeID,
		Action:              "CheckCluster",
		Reason:              EventReason,
		Type:                corev1.EventTypeWarning,
		Note:                note,
		Regarding: corev1.ObjectReference{
			APIVersion: "storage.k8s.io/v1", Kind: "CSIDriver", Name: c.DriverName, UID: types.UID(res.CSIDriverUID),
		},
	}
	if err := c.Client.Create(ctx, "events", metav1.NamespaceDefault, ev, &eventsv1.Event{}); err != nil {
		return fmt.Errorf("create event %s for CSIDriver %s: %w", EventReason, c.DriverName, err)
	}
	return nil
}

// NewClient returns a client for the cluster: from kubeconfig when it is not empty, else from
// the pod's service account when the process runs in a pod (KUBERNETES_SERVICE_HOST is set);
// nil and no error when neither, i.e. there is no cluster to check (make run, csi-sanity).
// The client knows the three API groups the check reads and writes (core, storage.k8s.io,
// events.k8s.io) and no others: not client-go's clientset (package kubeapi says why).
// Errors: an unreadable or invalid kubeconfig, an in-cluster config that cannot be loaded.
func NewClient(kubeconfig, userAgent string) (*kubeapi.Client, error) {
	var cfg *rest.Config
	var err error
	switch {
	case kubeconfig != "":
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	case os.Getenv("KUBERNETES_SERVICE_HOST") != "":
		cfg, err = rest.InClusterConfig()
	default:
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes client config: %w", err)
	}
	cfg.UserAgent = userAgent
	// Each request of the check is bounded on its own too, whatever the caller's context.
	cfg.Timeout = requestTimeout
	return NewClientForConfig(cfg)
}

// NewClientForConfig returns the check's client of the cluster cfg describes, as NewClient
// does from a kubeconfig (tests give it a fake API server's, kubeapitest). Errors: cfg cannot
// make an HTTP client.
func NewClientForConfig(cfg *rest.Config) (*kubeapi.Client, error) {
	return kubeapi.New(cfg, corev1.AddToScheme, storagev1.AddToScheme, eventsv1.AddToScheme)
}

// cutShort reports whether an attempt's err is the deadline's doing rather than an answer:
// the context is done, its deadline has passed (the timer that cancels it may not have run
// yet on a busy machine), or err is itself a context error.
func cutShort(ctx context.Context, err error) bool {
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}

// CheckUntil calls Check every interval until it answers (a Result, supported or not) or
// timeout has passed, so that an API server that is still starting or a network that is not up
// yet does not decide the node plugin's mode. The first failed attempt is logged, later ones
// at -v=4. Errors: when none answered, the last attempt's error that was not just the deadline
// cutting it short (so that the cause shows, e.g. "nodes "x" not found"), wrapped; the
// context's error when ctx ends first.
func (c Checker) CheckUntil(ctx context.Context, interval, timeout time.Duration) (Result, error) {
	var res Result
	var cause error
	attempts := 0
	err := wait.PollUntilContextTimeout(ctx, interval, timeout, true, func(ctx context.Context) (bool, error) {
		var err error
		res, err = c.Check(ctx)
		if err == nil {
			return true, nil
		}
		attempts++
		if cause == nil || !cutShort(ctx, err) {
			cause = err
		}
		logger := klog.FromContext(ctx)
		if attempts > 1 {
			logger = logger.V(4)
		}
		logger.Info("Cluster check failed, retrying", "driver", c.DriverName, "timeout", timeout, "err", err)
		return false, nil
	})
	if err != nil {
		if cause == nil {
			cause = err
		}
		return res, fmt.Errorf("cluster check for %s gave no answer within %s: %w", c.DriverName, timeout, cause)
	}
	return res, nil
}
