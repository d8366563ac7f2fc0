package clustercheck

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/version"
)

// CapacityDecision is what a node plugin reports: the capacity policy ("dynamic") or a static
// count ("static").
type CapacityDecision string

// The two decisions.
const (
	Dynamic CapacityDecision = "dynamic"
	Static  CapacityDecision = "static"
)

// Reason is why a node plugin decided as it did: a small fixed set (the metric's label values;
// AllReasons), one per rule of docs/compatibility.md. When several problems hold, the reason
// is the first one Check found (API server, CSIDriver, kubelet) that the Node label cannot
// override.
type Reason string

// The reasons, dynamic ones first.
const (
	// ReasonSupported: API server and kubelet v1.35+ (gate on by default or locked on) and the
	// CSIDriver's period read back.
	ReasonSupported Reason = "supported"
	// ReasonNodeLabelOverride: a v1.33/v1.34 API server or kubelet (gate off by default) whose
	// Node carries the mode label "true", with the period read back.
	ReasonNodeLabelOverride Reason = "node-label-override"
	// ReasonUnchecked: no cluster check (no API access, or no answer within
	// --cluster-check-timeout); the flag decided.
	ReasonUnchecked Reason = "unchecked"
	// ReasonFlagOff: --dynamic-capacity=false.
	ReasonFlagOff Reason = "flag-off"
	// ReasonNodeLabelOff: the Node's mode label is "false".
	ReasonNodeLabelOff Reason = "node-label-off"
	// ReasonAPIServerTooOld: API server older than v1.33 (no gate; the period is unknown to it).
	ReasonAPIServerTooOld Reason = "apiserver-too-old"
	// ReasonAPIServerGateOffByDefault: API server v1.33 or v1.34 without the label's word.
	ReasonAPIServerGateOffByDefault Reason = "apiserver-gate-off-by-default"
	// ReasonCSIDriverMissing: no CSIDriver object.
	ReasonCSIDriverMissing Reason = "csidriver-missing"
	// ReasonPeriodUnset: the CSIDriver's nodeAllocatableUpdatePeriodSeconds reads back unset
	// (never set, or dropped by an API server whose gate is off).
	ReasonPeriodUnset Reason = "period-unset"
	// ReasonKubeletTooOld: kubelet older than v1.33 (no gate: the count changes only at
	// re-registration).
	ReasonKubeletTooOld Reason = "kubelet-too-old"
	// ReasonKubeletGateOffByDefault: kubelet v1.33 or v1.34 without the label's word.
	ReasonKubeletGateOffByDefault Reason = "kubelet-gate-off-by-default"
)

// AllReasons lists every Reason, in a stable order.
func AllReasons() []Reason {
	return []Reason{ReasonSupported, ReasonNodeLabelOverride, ReasonUnchecked, ReasonFlagOff, ReasonNodeLabelOff,
		ReasonAPIServerTooOld, ReasonAPIServerGateOffByDefault, ReasonCSIDriverMissing, ReasonPeriodUnset,
		ReasonKubeletTooOld, ReasonKubeletGateOffByDefault}
}

// GateState is what a component's minor version implies for its MutableCSINodeAllocatableCount
// gate (KEP-4876: alpha in v1.33, beta off by default in v1.34, beta on by default in v1.35, GA
// and locked on from v1.36). The driver cannot read the gate itself.
type GateState string

// The gate states by version.
const (
	GateAbsent       GateState = "absent (before v1.33)"
	GateOffByDefault GateState = "off by default (v1.33 alpha, v1.34 beta): on only if turned on by hand"
	GateOnByDefault  GateState = "on by default (v1.35 beta): off only if turned off by hand"
	GateLockedOn     GateState = "locked on (v1.36+ GA)"
)

// gateAt is the GateState of a component at version v.
func gateAt(v *version.Version) GateState {
	switch {
	case v.Major() > 1 || v.Minor() >= 36:
		return GateLockedOn
	case v.Minor() == 35:
		return GateOnByDefault
	case v.Minor() >= 33:
		return GateOffByDefault
	default:
		return GateAbsent
	}
}

// AttacherEvidence says whether the external-attacher writes VolumeAttachment
// status.attachError.errorCode (external-attacher v4.12+, or v4.10/v4.11 with its
// MutableCSINodeAllocatableCount gate): without it a pod whose attach failed with
// RESOURCE_EXHAUSTED sits in ContainerCreating and only the kubelet's periodic refresh helps.
type AttacherEvidence string

// The attacher evidence values.
const (
	// AttacherWritesErrorCode: a VolumeAttachment of this driver carried an errorCode.
	AttacherWritesErrorCode AttacherEvidence = "seen"
	// AttacherNoErrorCodeSeen: none did, which proves nothing until an attach has failed.
	AttacherNoErrorCodeSeen AttacherEvidence = "not seen (no failed attach of this driver carried one yet)"
	// AttacherUnknown: VolumeAttachments could not be listed (RBAC: list volumeattachments).
	AttacherUnknown AttacherEvidence = "unknown (cannot list VolumeAttachments)"
)

// Evidence is what the node plugin saw when it decided. Fields are empty when not read.
type Evidence struct {
	// Checked: the cluster check answered; false when there was no API access or no answer.
	Checked bool `json:"checked"`
	// ServerVersion is the API server's gitVersion; ServerGate what it implies.
	ServerVersion string    `json:"serverVersion,omitempty"`
	ServerGate    GateState `json:"serverGate,omitempty"`
	// KubeletVersion is the Node's status.nodeInfo.kubeletVersion; KubeletGate what it
	// implies.
	KubeletVersion string    `json:"kubeletVersion,omitempty"`
	KubeletGate    GateState `json:"kubeletGate,omitempty"`
	// NodeAllocatableUpdatePeriodSeconds is the CSIDriver's period read back (seconds), absent
	// when unset or dropped.
	NodeAllocatableUpdatePeriodSeconds *int64 `json:"nodeAllocatableUpdatePeriodSeconds,omitempty"`
	// CSIDriverFound: the CSIDriver object exists.
	CSIDriverFound bool `json:"csiDriverFound"`
	// AttacherErrorCode: whether the attacher writes VolumeAttachment errorCode.
	AttacherErrorCode AttacherEvidence `json:"attacherErrorCode,omitempty"`
	// ModeLabel is the Node's mode label value, absent when the Node has none.
	ModeLabel *string `json:"modeLabel,omitempty"`
	// Problems are the check's sentences (why not dynamic); Overridden those the label
	// overrode.
	Problems   []string `json:"problems,omitempty"`
	Overridden []string `json:"overridden,omitempty"`
}

// Decision is a node plugin's capacity decision with its reason and evidence, made once at
// start (Decide); /debug/capacity shows it under "decision".
type Decision struct {
	Decision  CapacityDecision `json:"decision"`
	Reason    Reason           `json:"reason"`
	DecidedAt time.Time        `json:"decidedAt"`
	Evidence  Evidence         `json:"evidence"`
	// kubeletMinor is the kubelet's minor version for the metric, 0 when not read.
	kubeletMinor int
}

// evidenceOf is the Evidence of a check's answer.
func evidenceOf(res Result) Evidence {
	e := Evidence{
		Checked: true, ServerVersion: res.ServerVersion, ServerGate: res.ServerGate,
		KubeletVersion: res.KubeletVersion, KubeletGate: res.KubeletGate,
		NodeAllocatableUpdatePeriodSeconds: res.PeriodSeconds, CSIDriverFound: res.CSIDriverUID != "",
		AttacherErrorCode: res.AttacherErrorCode, Problems: res.Problems, Overridden: res.Overridden,
	}
	if res.ModeLabelSet {
		v := res.ModeLabel
		e.ModeLabel = &v
	}
	return e
}

// decisionOf is the Decision for a check's answer res given what was wanted: want and, when
// !want, whether the Node label (not the flag) said so. It is the rule of
// docs/compatibility.md; Decide follows it.
func decisionOf(res Result, want, labelOff bool, now time.Time) Decision {
	d := Decision{Decision: Dynamic, Reason: ReasonSupported, DecidedAt: now.UTC(), Evidence: evidenceOf(res), kubeletMinor: res.KubeletMinor}
	switch {
	case !want && labelOff:
		d.Decision, d.Reason = Static, ReasonNodeLabelOff
	case !want:
		d.Decision, d.Reason = Static, ReasonFlagOff
	case len(res.ProblemReasons) > 0:
		d.Decision, d.Reason = Static, mainReason(res.ProblemReasons)
	case len(res.Overridden) > 0:
		d.Reason = ReasonNodeLabelOverride
	}
	return d
}

// mainReason is the reason of the first problem the label cannot override, else the first:
// the one to fix first.
func mainReason(reasons []Reason) Reason {
	for _, r := range reasons {
		if r != ReasonAPIServerGateOffByDefault && r != ReasonKubeletGateOffByDefault {
			return r
		}
	}
	return reasons[0]
}

// uncheckedDecision is the Decision when the cluster was not checked: the flag decides.
func uncheckedDecision(dynamic bool, now time.Time) Decision {
	if dynamic {
		return Decision{Decision: Dynamic, Reason: ReasonUnchecked, DecidedAt: now.UTC()}
	}
	return Decision{Decision: Static, Reason: ReasonFlagOff, DecidedAt: now.UTC()}
}

// exportDecision registers, in reg (nil: none), fakecloud_csi_cluster_capacity_decision
// {decision, reason} = 1 for d and 0 for every other pair (bounded: 2 × len(AllReasons()) series),
// and fakecloud_csi_cluster_kubelet_minor_version = the kubelet's minor (0: not read). A
// registration error is returned for the caller to log.
func exportDecision(reg prometheus.Registerer, d Decision) error {
	if reg == nil {
		return nil
	}
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "fakecloud_csi", Subsystem: "cluster", Name: "capacity_decision",
		Help: "1 for the node plugin's capacity decision at start (dynamic or static) and its reason (docs/compatibility.md), 0 for the others.",
	}, []string{"decision", "reason"})
	for _, dec := range []CapacityDecision{Dynamic, Static} {
		for _, r := range AllReasons() {
			v := 0.0
			if dec == d.Decision && r == d.Reason {
				v = 1
			}
			g.WithLabelValues(string(dec), string(r)).Set(v)
		}
	}
	minor := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "fakecloud_csi", Subsystem: "cluster", Name: "kubelet_minor_version",
		Help: "The minor version of this node's kubelet (status.nodeInfo.kubeletVersion) when the node plugin decided; 0 when not read.",
	})
	minor.Set(float64(d.kubeletMinor))
	if err := reg.Register(g); err != nil {
		return err
	}
	return reg.Register(minor)
}
