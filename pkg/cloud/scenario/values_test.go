package scenario_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/scenario"
)

// TestParseChecksStepValuesAsTheAPIDoes: a step's values are checked when the file is read,
// by the rules (and with the messages, did-you-mean included) the fake cloud's API applies to
// the request the step makes, every problem at once in file order (issue 26, "the first
// hour"). Before, an unknown fault operation or health, an out-of-range limit, quota or
// latency parsed (and passed --dry-run), and failed only when its step ran.
func TestParseChecksStepValuesAsTheAPIDoes(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       []string // the error's lines, whole, in order
	}{
		{"every kind of value, in file order", `name: x
steps:
  - at: 1s
    fault: {ref: f, operation: AttachVolme, error: Unavailable}
  - at: 2s
    fault: {instanceId: node-a1, health: impared}
  - at: 3s
    instance: {id: node-a1, attachLimit: -1}
  - at: 4s
    quotas: {attachments: 2000000, volumes: -3}
  - at: 5s
    fault: {operation: AttachVolume, latencyMs: 3600000, error: Unavailabel}
  - at: 6s
    quotaNoise: {quota: attachment, base: 5, amplitude: 1, every: 1s, for: 10s}
  - at: 7s
    instance: {id: node-a1, outOfBandSlots: 5000}
  - at: 8s
    quotaNoise: {quota: volumes, base: 1000000, amplitude: 1, every: 1s, for: 10s}
  - at: 9s
    instance: {id: node-a1}
`, []string{
			`scenario "x": line 4, steps[0].fault (at 1s): unknown operation "AttachVolme" (want "*" or one of [CreateVolume DeleteVolume GetVolume ListVolumes AttachVolume DetachVolume ResizeVolume ModifyVolume GetCapacity GetInstance CreateSnapshot DeleteSnapshot ListSnapshots CreateGroupSnapshot DeleteGroupSnapshot]); did you mean "AttachVolume"?`,
			`line 6, steps[1].fault (at 2s): instance health must be one of [ok impaired stopped], got "impared"; did you mean "impaired"?`,
			`line 8, steps[2].instance (at 3s): attachLimit must be >= 1, got -1 (to leave no slot for volumes, set outOfBandSlots to the limit)`,
			`line 10, steps[3].quotas (at 4s): attachments must be in [0, 1000000], got 2000000`,
			`line 10, steps[3].quotas (at 4s): volumes must be in [0, 1000000], got -3`,
			// Every code of the one table (a new code is a row there, not an edit here).
			fmt.Sprintf(`line 12, steps[4].fault (at 5s): unknown error code "Unavailabel" (want one of %v); did you mean "Unavailable"?`, cloud.Codes()),
			`line 12, steps[4].fault (at 5s): latencyMs must be in [0, 60000], got 3600000`,
			`line 14, steps[5].quotaNoise (at 6s): quota "attachment": want attachments or volumes; did you mean "attachments"?`,
			`line 16, steps[6].instance (at 7s): outOfBandSlots must be in [0, 4096], got 5000`,
			`line 18, steps[7].quotaNoise (at 8s): base + amplitude must be in [0, 1000000], got 1000001`,
			`line 20, steps[8].instance (at 9s): patch changes nothing`,
		}},
		{"a fault step names its rule by ref: an id is the server's", `name: x
steps:
  - at: 1s
    fault: {id: mine, operation: "*", error: Unavailable}
  - at: 2s
    fault: {volumeId: v1, health: faild}
`, []string{
			`scenario "x": line 4, steps[0].fault (at 1s): id is assigned by the server`,
			`line 6, steps[1].fault (at 2s): volume health must be one of [ok degraded failed], got "faild"; did you mean "failed"?`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := scenario.Parse([]byte(tt.yaml))
			if err == nil {
				t.Fatal("Parse: nil error, want the file's problems")
			}
			got := strings.Split(err.Error(), "\n")
			for i, w := range tt.want {
				if i >= len(got) || got[i] != w {
					t.Fatalf("line %d of the error:\n got %q\nwant %q\nwhole error:\n%v", i, at(got, i), w, err)
				}
			}
			if len(got) != len(tt.want) {
				t.Fatalf("%d problems, want %d:\n%v", len(got), len(tt.want), err)
			}
		})
	}
}

func at(lines []string, i int) string {
	if i < len(lines) {
		return lines[i]
	}
	return "(none)"
}
