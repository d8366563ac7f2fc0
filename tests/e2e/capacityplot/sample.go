package capacityplot

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/admin"
)

// Sample is one node at one instant.
type Sample struct {
	At   time.Time `json:"at"`
	Node string    `json:"node"`
	// Cloud is the instance's capacity reading; nil when the lookup failed
	// (CloudErr says why).
	Cloud    *cloud.Capacity `json:"cloud,omitempty"`
	CloudErr string          `json:"cloudError,omitempty"`
	// Truth is Truth() of Cloud; 0 when Cloud is nil.
	Truth int64 `json:"truth"`
	// CSINode is the driver's allocatable.count; nil when absent.
	CSINode *int64 `json:"csinode"`
	// Plugin is the node plugin's last reported max_volumes_per_node from its
	// /debug/capacity endpoint; nil when not configured or unreachable.
	Plugin *int64 `json:"plugin"`
	// Scheduled counts distinct PersistentVolumes of the driver used by
	// non-terminated pods bound to the node: what the scheduler counts
	// against the limit.
	Scheduled int `json:"scheduled"`
	// VolumeAttachments counts the driver's VolumeAttachments for the node,
	// Attached those with status.attached.
	VolumeAttachments int `json:"volumeAttachments"`
	Attached          int `json:"attached"`
}

// Listers are the informer caches the sampler reads.
type Listers struct {
	CSINodes          storagelisters.CSINodeLister
	VolumeAttachments storagelisters.VolumeAttachmentLister
	Pods              corelisters.PodLister
	PVCs              corelisters.PersistentVolumeClaimLister
	PVs               corelisters.PersistentVolumeLister
}

// Sampler reads one sample per node from the cloud, the cluster caches and,
// optionally, the node plugins.
type Sampler struct {
	Driver  string
	Cloud   *admin.Client
	Listers Listers
	Share   QuotaShare
	// PluginURLs maps node name to the node plugin's HTTP base URL
	// (--http-addr); nodes without one have no Plugin value.
	PluginURLs map[string]string
	// HTTP is used for the plugin endpoints; nil means a client with a 2 s
	// timeout.
	HTTP *http.Client
}

// SampleNode reads one sample of node whose cloud instance is instanceID.
// Failures of single sources leave their fields empty; it does not fail.
func (s *Sampler) SampleNode(ctx context.Context, at time.Time, node, instanceID string) Sample {
	sm := Sample{At: at, Node: node}
	if c, err := s.Cloud.GetCapacity(ctx, instanceID); err != nil {
		sm.CloudErr = err.Error()
	} else {
		sm.Cloud = c
		sm.Truth = Truth(c.Slots(), c.Attached, c.QuotaHeadroom, c.Instances, s.Share)
	}
	if cn, err := s.Listers.CSINodes.Get(node); err == nil {
		sm.CSINode = (&Watcher{driver: s.Driver}).count(cn)
	}
	if vas, err := s.Listers.VolumeAttachments.List(labels.Everything()); err == nil {
		sm.VolumeAttachments, sm.Attached = countAttachments(vas, s.Driver, node)
	}
	if pods, err := s.Listers.Pods.List(labels.Everything()); err == nil {
		sm.Scheduled = s.scheduledVolumes(pods, node)
	}
	if u := s.PluginURLs[node]; u != "" {
		if v, err := s.pluginReported(ctx, u); err == nil {
			sm.Plugin = &v
		}
	}
	return sm
}

func countAttachments(vas []*storagev1.VolumeAttachment, driver, node string) (total, attached int) {
	for _, va := range vas {
		if va.Spec.Attacher != driver || va.Spec.NodeName != node {
			continue
		}
		total++
		if va.Status.Attached {
			attached++
		}
	}
	return total, attached
}

// scheduledVolumes counts the driver's PVs used by live pods on node.
func (s *Sampler) scheduledVolumes(pods []*corev1.Pod, node string) int {
	pvs := map[string]bool{}
	for _, p := range pods {
		if p.Spec.NodeName != node || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim == nil {
				continue
			}
			claim, err := s.Listers.PVCs.PersistentVolumeClaims(p.Namespace).Get(v.PersistentVolumeClaim.ClaimName)
			if err != nil || claim.Spec.VolumeName == "" {
				continue
			}
			pv, err := s.Listers.PVs.Get(claim.Spec.VolumeName)
			if err != nil || pv.Spec.CSI == nil || pv.Spec.CSI.Driver != s.Driver {
				continue
			}
			pvs[pv.Name] = true
		}
	}
	return len(pvs)
}

// pluginReported reads "reported" from the node plugin's /debug/capacity.
func (s *Sampler) pluginReported(ctx context.Context, base string) (int64, error) {
	hc := s.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 2 * time.Second}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/debug/capacity", nil)
	if err != nil {
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %s", req.URL, resp.Status)
	}
	var body struct {
		Reported *int64 `json:"reported"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return 0, fmt.Errorf("GET %s: %w", req.URL, err)
	}
	if body.Reported == nil {
		return 0, fmt.Errorf("GET %s: no reported value", req.URL)
	}
	return *body.Reported, nil
}
