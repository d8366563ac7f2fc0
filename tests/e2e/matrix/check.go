package matrix

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud/admin"
	"github.com/fakecloud/fakecloud-csi/tests/e2e/localcluster"
)

// The kubeconfig mode (docs/compatibility.md): the cell checks of RunCell run on a cluster
// where the driver is already deployed (kind with real kubelets, a user's cluster), against
// one node and the fake cloud serving it. It changes what the checks change (the node's
// out-of-band slots, the CSIDriver's period, a namespace of claims and pods, the node's plugin
// pod) and puts every one of them back before it returns, also when a check fails or ctx is
// cancelled (Ctrl-C): the restore runs on a context of its own, bounded by CleanupTimeout.

// GateName is the KEP-4876 feature gate of the API server and the kubelet.
const GateName = "MutableCSINodeAllocatableCount"

// CheckOptions say which cluster, node and fake cloud RunCheck checks.
type CheckOptions struct {
	// Clientset is the cluster's. It needs: create and delete a namespace and, in it, PVCs,
	// pods and a StatefulSet; patch the CSIDriver; list and delete the node plugin's pods;
	// get pods/proxy (the plugin's /debug endpoints); read nodes, CSINodes, PVs and
	// VolumeAttachments (cluster-admin has all of it).
	Clientset kubernetes.Interface
	// Cloud is an admin client of the fake cloud that serves the driver (out-of-band slots).
	Cloud *admin.Client
	// Cells are the matrix's cells (cells.json): the node's cell gives the right outcome.
	Cells []Cell
	// Node is the node to check; "": the first (by name) whose CSINode lists the driver with
	// a count above 1 and that has a second such node in its zone.
	Node string
	// DriverNamespace and PluginSelector find the node plugin's pods (deploy/base:
	// fakecloud-csi, app.kubernetes.io/name=fakecloud-csi-node).
	DriverNamespace, PluginSelector string
	// Namespace is the checks' own; it must not exist (RunCheck creates and deletes it).
	Namespace string
	// PodImage is the checks' pods' image (any image the nodes have: the pods only hold
	// volumes).
	PodImage string
	// Cluster names the cluster in the row ("kind"); Commit is the clone's describe.
	Cluster, Commit string
	// KubeletGates reads node's kubelet feature gates (ConfigzGates); nil or an error: the
	// cell is found without them.
	KubeletGates func(ctx context.Context, node string) (map[string]bool, error)
	// CleanupTimeout bounds the restore (default 4 minutes: the claims' volumes are deleted).
	CleanupTimeout time.Duration
	// Out receives progress.
	Out io.Writer
}

var dnsLabelRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// validate reports every problem of o.
func (o *CheckOptions) validate() error {
	var errs []error
	if o.Clientset == nil || o.Cloud == nil || o.Out == nil {
		errs = append(errs, errors.New("check: a clientset, a cloud client and an output are required"))
	}
	for _, v := range []struct{ what, v string }{{"namespace", o.Namespace}, {"driver namespace", o.DriverNamespace}, {"cluster", o.Cluster}} {
		if !dnsLabelRE.MatchString(v.v) {
			errs = append(errs, fmt.Errorf("check: %s %q: want a DNS label ([a-z0-9-], at most 63)", v.what, v.v))
		}
	}
	if o.Node != "" && (len(o.Node) > 253 || strings.ContainsAny(o.Node, "/ \t\n")) {
		errs = append(errs, fmt.Errorf("check: node %q is not a node name", o.Node))
	}
	if o.PluginSelector == "" || o.PodImage == "" || len(o.PluginSelector) > 1024 || len(o.PodImage) > 1024 {
		errs = append(errs, errors.New("check: a plugin selector and a pod image (each at most 1024 bytes) are required"))
	}
	if o.CleanupTimeout < 0 || o.CleanupTimeout > time.Hour {
		errs = append(errs, fmt.Errorf("check: cleanup timeout %s: want 0 (default) up to 1h", o.CleanupTimeout))
	}
	return errors.Join(errs...)
}

// RunCheck runs RunCell's checks on o.Node (or the node it picks) of a cluster where the
// driver is deployed and returns the row: the node's cell (Cell.Name; Cell's versions, period,
// kubelet gate and label as observed; Expect the matrix cell's, none when no cell matches:
// then the row is not judged), Cluster and Node set. A check that cannot run is in
// Row.Errors, and so is a part of the restore that failed ("cleanup: ..."). Errors (nothing
// changed): bad options, the cluster cannot be read, no node fits, the namespace exists.
func RunCheck(ctx context.Context, o CheckOptions) (row Row, err error) {
	if err := o.validate(); err != nil {
		return row, err
	}
	if o.CleanupTimeout == 0 {
		o.CleanupTimeout = 4 * time.Minute
	}
	cs := o.Clientset
	obs, err := Observe(ctx, cs, localcluster.DriverName, o.DriverNamespace)
	if err != nil {
		return row, err
	}
	target, spare, err := pickNodes(ctx, cs, o.Node)
	if err != nil {
		return row, err
	}
	var gates map[string]bool
	if o.KubeletGates != nil {
		if gates, err = o.KubeletGates(ctx, target); err != nil {
			fmt.Fprintf(o.Out, "matrix check: the kubelet's feature gates of %s not read (%v): its cell is found without them\n", target, err)
			gates = nil
		}
	}
	c, matched := cellFor(obs, target, gates, o.Cells)
	if _, err := cs.CoreV1().Namespaces().Get(ctx, o.Namespace, metav1.GetOptions{}); err == nil {
		return row, fmt.Errorf("namespace %s exists: the checks create and delete their own; delete it (or pass another) if nothing else uses it", o.Namespace)
	} else if !apierrors.IsNotFound(err) {
		return row, fmt.Errorf("read namespace %s: %w", o.Namespace, err)
	}
	saved, err := saveState(ctx, cs, o.Cloud, target)
	if err != nil {
		return row, err
	}
	row = Row{Cell: c, Cluster: o.Cluster, Node: target, Date: time.Now().UTC(), Commit: o.Commit,
		FollowWindowSeconds: followWindow.Seconds(), RejectWindowSeconds: rejectWindow.Seconds()}
	r := &cellRun{o: Options{Commit: o.Commit, Out: o.Out}, cs: cs, cloud: o.Cloud, row: &row,
		plugins: kubePlugins{cs: cs, namespace: o.DriverNamespace, selector: o.PluginSelector},
		target:  target, ns: o.Namespace, podImage: o.PodImage, period: saved.periodValue()}
	start := time.Now()
	defer func() {
		// The restore runs whatever happened to ctx (Ctrl-C): on a context of its own.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.CleanupTimeout)
		defer cancel()
		r.logf("restoring what the checks changed (up to %s)", o.CleanupTimeout)
		for _, e := range r.restore(cctx, saved) {
			row.Errors = append(row.Errors, "cleanup: "+e.Error())
			r.logf("cleanup: %v", e)
		}
		row.TotalSeconds = time.Since(start).Seconds()
		row.judge()
	}()
	cellText := "no cell of the matrix has these versions and settings: measured, not judged"
	if matched {
		cellText = "cell " + c.Name
	}
	r.logf("node %s (spare %s in its zone): API server %s, kubelet %s, attacher %s, period %s, kubelet gates %s: %s",
		target, spare, c.ControlPlane, c.Kubelet, c.Attacher, periodText(c.PeriodSeconds), gatesText(gates), cellText)
	r.runChecks(ctx)
	return row, nil
}

// gatesText is "A=true,B=false" of gates (sorted), "not read" for nil, "defaults" when empty.
func gatesText(gates map[string]bool) string {
	if gates == nil {
		return "not read"
	}
	if len(gates) == 0 {
		return "defaults"
	}
	var out []string
	for k, v := range gates {
		out = append(out, k+"="+strconv.FormatBool(v))
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// pickNodes returns the node to check (want, or the first fitting by name) and a spare: a
// node in the same zone (ZoneLabel) for the rejected pod's replacement. A node fits when it
// is schedulable, has no NoSchedule/NoExecute taint (the checks' pods tolerate none) and its
// CSINode lists the driver (the target with a count above 1: the follow check takes one
// slot). Errors say why no node fits.
func pickNodes(ctx context.Context, cs kubernetes.Interface, want string) (target, spare string, err error) {
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: maxNodes})
	if err != nil {
		return "", "", fmt.Errorf("list nodes: %w", err)
	}
	type fit struct {
		zone  string
		count int32
		why   string // "" when it fits
	}
	fits := map[string]fit{}
	var names []string
	for _, n := range nodes.Items {
		f := fit{zone: n.Labels[localcluster.ZoneLabel]}
		switch {
		case n.Spec.Unschedulable:
			f.why = "unschedulable (cordoned)"
		case f.zone == "":
			f.why = "no " + localcluster.ZoneLabel + " label (the driver has not registered there)"
		}
		for _, t := range n.Spec.Taints {
			if f.why == "" && (t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute) {
				f.why = "tainted " + t.Key + ":" + string(t.Effect)
			}
		}
		if f.why == "" {
			count, listed, err := countOn(ctx, cs, n.Name)
			switch {
			case err != nil:
				return "", "", err
			case !listed:
				f.why = "its CSINode does not list " + localcluster.DriverName
			default:
				f.count = count
			}
		}
		fits[n.Name] = f
		names = append(names, n.Name)
	}
	sort.Strings(names)
	spareOf := func(t string) string {
		for _, n := range names {
			if n != t && fits[n].why == "" && fits[n].zone == fits[t].zone {
				return n
			}
		}
		return ""
	}
	if want != "" {
		f, ok := fits[want]
		switch {
		case !ok:
			return "", "", fmt.Errorf("node %s: no such node", want)
		case f.why != "":
			return "", "", fmt.Errorf("node %s: %s", want, f.why)
		case f.count < 2:
			return "", "", fmt.Errorf("node %s: CSINode count %d, want at least 2 (the count check takes one slot)", want, f.count)
		}
		if s := spareOf(want); s != "" {
			return want, s, nil
		}
		return "", "", fmt.Errorf("node %s: no other node of zone %s fits (the rejected pod's replacement needs one)", want, f.zone)
	}
	var whys []string
	for _, n := range names {
		f := fits[n]
		if f.why == "" && f.count >= 2 {
			if s := spareOf(n); s != "" {
				return n, s, nil
			}
			f.why = "no other node of zone " + f.zone + " fits"
		} else if f.why == "" {
			f.why = fmt.Sprintf("CSINode count %d, want at least 2", f.count)
		}
		whys = append(whys, n+": "+f.why)
	}
	return "", "", fmt.Errorf("no node to check: %s", strings.Join(whys, "; "))
}

// countOn is node's CSINode count for the driver (listed false: the driver is not listed, or
// the CSINode does not exist).
func countOn(ctx context.Context, cs kubernetes.Interface, node string) (count int32, listed bool, err error) {
	cn, err := cs.StorageV1().CSINodes().Get(ctx, node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("read CSINode %s: %w", node, err)
	}
	for _, d := range cn.Spec.Drivers {
		if d.Name == localcluster.DriverName {
			if d.Allocatable == nil || d.Allocatable.Count == nil {
				return 0, true, nil
			}
			return *d.Allocatable.Count, true, nil
		}
	}
	return 0, false, nil
}

// gateOn is whether the KEP-4876 gate of a component of version v is on: explicit's setting,
// else its default (on from 1.35). A version that does not parse counts as the newest.
func gateOn(v string, explicit map[string]bool) bool {
	if on, ok := explicit[GateName]; ok {
		return on
	}
	m := minorRE.FindStringSubmatch(v)
	if m == nil {
		return true
	}
	minor, _ := strconv.Atoi(m[2])
	return m[1] != "1" || minor >= 35
}

// parseGates reads a --feature-gates value (A=true,B=false); entries that do not parse are
// left out.
func parseGates(s string) map[string]bool {
	out := map[string]bool{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if b, err := strconv.ParseBool(v); ok && err == nil {
			out[k] = b
		}
	}
	return out
}

// cellFor is the cell node of the observed cluster is in: Which's first match (by name) whose
// kubelet gate state (its gates or its minor's default) is the node's (gates nil: not
// compared). The returned cell carries what was observed: the API server, kubelet and
// attacher versions, the period, the node's label and (when read) its kubelet gate. matched
// false: no cell fits; the cell is named after the versions and has no Expect.
func cellFor(o Observed, node string, gates map[string]bool, cells []Cell) (c Cell, matched bool) {
	k := o.Kubelets[node]
	one := o
	one.Kubelets = map[string]ObservedKubelet{node: k}
	byName := map[string]Cell{}
	for _, c := range cells {
		byName[c.Name] = c
	}
	for _, name := range Which(one, cells)[node] {
		cand := byName[name]
		if gates == nil || gateOn(cand.Kubelet, parseGates(cand.KubeletGates)) == gateOn(k.Version, gates) {
			c, matched = cand, true
			break
		}
	}
	if !matched {
		c = Cell{Name: fmt.Sprintf("cp%s-kubelet%s-attacher%s-not-in-the-matrix", minorOf(o.ServerVersion), minorOf(k.Version), minorOf(o.Attacher))}
	}
	c.ControlPlane, c.Kubelet = o.ServerVersion, k.Version
	if o.Attacher != "" {
		c.Attacher = o.Attacher
	}
	c.PeriodSeconds, c.PeriodChanges = 0, nil
	if o.PeriodSeconds != nil {
		c.PeriodSeconds = *o.PeriodSeconds
	}
	c.NodeLabels = ""
	if k.Labelled {
		c.NodeLabels = ModeLabel + "=true"
	}
	if gates != nil {
		c.KubeletGates = ""
		if on, ok := gates[GateName]; ok {
			c.KubeletGates = GateName + "=" + strconv.FormatBool(on)
		}
	}
	return c, matched
}

// ConfigzGates returns a func reading node's kubelet feature gates from its /configz through
// the API server's node proxy (GET /api/v1/nodes/NODE/proxy/configz; nodes/proxy rights).
func ConfigzGates(cs kubernetes.Interface) func(ctx context.Context, node string) (map[string]bool, error) {
	return func(ctx context.Context, node string) (map[string]bool, error) {
		data, err := cs.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", node, "proxy", "configz").DoRaw(ctx)
		if err != nil {
			return nil, fmt.Errorf("kubelet configz of %s: %w", node, err)
		}
		return parseConfigz(data)
	}
}

// parseConfigz reads the feature gates of a kubelet's /configz answer (at most 1 MiB).
func parseConfigz(data []byte) (map[string]bool, error) {
	if len(data) > 1<<20 {
		return nil, errors.New("configz: over 1 MiB")
	}
	var z struct {
		KubeletConfig *struct {
			FeatureGates map[string]bool `json:"featureGates"`
		} `json:"kubeletconfig"`
	}
	if err := json.Unmarshal(data, &z); err != nil {
		return nil, fmt.Errorf("configz: %w", err)
	}
	if z.KubeletConfig == nil {
		return nil, errors.New("configz: no kubeletconfig")
	}
	if z.KubeletConfig.FeatureGates == nil {
		return map[string]bool{}, nil
	}
	return z.KubeletConfig.FeatureGates, nil
}
