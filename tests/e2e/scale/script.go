package scale

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/scenario"
)

// The churn script of one phase, as offsets from its start.
const (
	// oobAt: out-of-band slots rise by oobExtra on every OOBEvery-th node.
	oobAt = 5 * time.Second
	// squeezeAt..squeezeAt+squeezeFor: the attachment quota's headroom falls to
	// squeezeHeadroom, with ±1 noise every noiseEvery.
	squeezeAt  = 10 * time.Second
	squeezeFor = 15 * time.Second
	noiseEvery = 5 * time.Second
	// outageAt..outageAt+outageFor: every GetCapacity answers Unavailable.
	outageAt  = 30 * time.Second
	outageFor = 10 * time.Second
	// ScriptLength is the offset of the last step (the outage ends, the slots come back).
	ScriptLength = outageAt + outageFor

	oobExtra        = 2
	squeezeHeadroom = 2
	// OOBEvery picks the nodes whose out-of-band slots change: one in ten.
	OOBEvery = 10
)

// ScriptInput is the cloud state a phase's script starts from.
type ScriptInput struct {
	// Nodes are the instance IDs, in order; every OOBEvery-th from the first gets the
	// out-of-band change.
	Nodes []string
	// OutOfBand is each node's out-of-band slots now, by ID.
	OutOfBand map[string]int
	// Quota is the attachment quota's limit to restore; Used the attachments in use now.
	Quota, Used int64
	// Seed makes the noise repeat.
	Seed uint64
}

// Script is one phase's churn as a scenario (pkg/cloud/scenario): the same relative
// timeline at every N and period, so writes per real change compare across them.
//
//	+5s   out-of-band slots +2 on one node in ten (a real change on a fraction of the fleet)
//	+10s  attachment quota squeezed to 2 above its use, ±1 every 5 s for 15 s (a change of
//	      every node's truth at once, then noise; the quota share is "none", so every node
//	      counts the whole headroom)
//	+25s  quota back
//	+30s  GetCapacity Unavailable for every instance for 10 s
//	+40s  outage over; the out-of-band slots back
func Script(in ScriptInput) (*scenario.Scenario, error) {
	d := func(t time.Duration) scenario.Duration { return scenario.Duration(t) }
	var steps []scenario.Step
	var picked []string
	for i := 0; i < len(in.Nodes); i += OOBEvery {
		picked = append(picked, in.Nodes[i])
	}
	for _, id := range picked {
		v := in.OutOfBand[id] + oobExtra
		steps = append(steps, scenario.Step{At: d(oobAt), Instance: &scenario.InstanceStep{ID: id, InstancePatch: cloud.InstancePatch{OutOfBandSlots: &v}}})
	}
	steps = append(steps, scenario.Step{At: d(squeezeAt), Note: "quota squeeze with ±1 noise", QuotaNoise: &scenario.Noise{
		Quota: "attachments", Base: in.Used + squeezeHeadroom, Amplitude: 1, Every: d(noiseEvery), For: d(squeezeFor), Seed: in.Seed,
	}})
	quota := in.Quota
	steps = append(steps,
		scenario.Step{At: d(squeezeAt + squeezeFor), Quotas: &cloud.QuotasPatch{Attachments: &quota}},
		scenario.Step{At: d(outageAt), Fault: &scenario.FaultStep{Ref: "outage", FaultRule: cloud.FaultRule{Operation: cloud.OperationGetCapacity, Error: cloud.CodeUnavailable}}},
		scenario.Step{At: d(outageAt + outageFor), DeleteFault: "outage"},
	)
	for _, id := range picked {
		v := in.OutOfBand[id]
		steps = append(steps, scenario.Step{At: d(outageAt + outageFor), Instance: &scenario.InstanceStep{ID: id, InstancePatch: cloud.InstancePatch{OutOfBandSlots: &v}}})
	}
	sc := scenario.Scenario{Name: "scale-churn", Description: fmt.Sprintf("out-of-band slots on %d of %d nodes, quota squeeze with noise, a GetCapacity outage", len(picked), len(in.Nodes)), Steps: steps}
	// Through Parse, which validates the steps and expands the noise as for a file.
	data, err := json.Marshal(sc)
	if err != nil {
		return nil, fmt.Errorf("churn script: %w", err)
	}
	out, err := scenario.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("churn script: %w", err)
	}
	return out, nil
}
