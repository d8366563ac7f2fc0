package matrix

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// ModeLabel is the driver's per-node mode label (pkg/csi.DynamicCapacityNodeLabel): "true" is
// the operator's word that a v1.33/v1.34 kubelet's gate was turned on by hand.
const ModeLabel = "fakecloud.dev/dynamic-capacity"

// Observed is what a cluster shows of the matrix's axes.
type Observed struct {
	// ServerVersion is the API server's gitVersion.
	ServerVersion string
	// Kubelets are the nodes' kubelet versions and whether the node is labelled ModeLabel=true,
	// one entry per node, by node name.
	Kubelets map[string]ObservedKubelet
	// Attacher is the external-attacher image tag of the controller's csi-attacher container
	// ("" when not found).
	Attacher string
	// PeriodSeconds is the CSIDriver's nodeAllocatableUpdatePeriodSeconds, nil when unset.
	PeriodSeconds *int64
}

// ObservedKubelet is one node's kubelet.
type ObservedKubelet struct {
	Version  string
	Labelled bool
}

var minorRE = regexp.MustCompile(`^v?([0-9]+)\.([0-9]+)`)

// minorOf is "1.34" of "v1.34.4-eks-1"; "" when it does not parse.
func minorOf(v string) string {
	m := minorRE.FindStringSubmatch(v)
	if m == nil {
		return ""
	}
	return m[1] + "." + m[2]
}

// Which names, per node, the cells whose control plane, kubelet and attacher minors and
// CSIDriver period match the cluster's and whose "gate on by hand" setting matches the node's
// label; a node no cell
// matches gets none (its cell is not in the matrix yet).
func Which(o Observed, cells []Cell) map[string][]string {
	out := map[string][]string{}
	for node, k := range o.Kubelets {
		var names []string
		for _, c := range cells {
			handOn := strings.Contains(c.NodeLabels, ModeLabel+"=true")
			if minorOf(c.ControlPlane) == minorOf(o.ServerVersion) && minorOf(c.Kubelet) == minorOf(k.Version) &&
				(o.Attacher == "" || minorOf(c.Attacher) == minorOf(o.Attacher)) && handOn == k.Labelled && periodMatches(c, o.PeriodSeconds) {
				names = append(names, c.Name)
			}
		}
		sort.Strings(names)
		out[node] = names
	}
	return out
}

// periodMatches: c runs with the CSIDriver period observed (nil: unset) and keeps it (a cell
// that changes the period while running is about the change, not a cluster's state).
func periodMatches(c Cell, observed *int64) bool {
	var p int64
	if observed != nil {
		p = *observed
	}
	return len(c.PeriodChanges) == 0 && c.PeriodSeconds == p
}

// maxNodes bounds the nodes Observe reads.
const maxNodes = 5000

// Observe reads a cluster's axes: GET /version, the Nodes (at most maxNodes), the CSIDriver
// driverName and the csi-attacher container image of Deployments in namespace (the controller
// plugin's).
func Observe(ctx context.Context, cs kubernetes.Interface, driverName, namespace string) (Observed, error) {
	var o Observed
	info, err := cs.Discovery().ServerVersion()
	if err != nil {
		return o, fmt.Errorf("read the API server version: %w", err)
	}
	o.ServerVersion = info.GitVersion
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: maxNodes})
	if err != nil {
		return o, fmt.Errorf("list nodes: %w", err)
	}
	o.Kubelets = map[string]ObservedKubelet{}
	for _, n := range nodes.Items {
		o.Kubelets[n.Name] = ObservedKubelet{Version: n.Status.NodeInfo.KubeletVersion, Labelled: n.Labels[ModeLabel] == "true"}
	}
	if d, err := cs.StorageV1().CSIDrivers().Get(ctx, driverName, metav1.GetOptions{}); err == nil {
		o.PeriodSeconds = d.Spec.NodeAllocatableUpdatePeriodSeconds
	}
	if deps, err := cs.AppsV1().Deployments(namespace).List(ctx, metav1.ListOptions{}); err == nil {
		for _, d := range deps.Items {
			for _, c := range d.Spec.Template.Spec.Containers {
				if strings.Contains(c.Image, "csi-attacher:") {
					o.Attacher = c.Image[strings.LastIndex(c.Image, ":")+1:]
				}
			}
		}
	}
	return o, nil
}
