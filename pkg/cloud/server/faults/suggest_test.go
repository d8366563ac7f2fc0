package faults_test

import (
	"strings"
	"testing"
	"time"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/faults"
)

// TestAddSuggestsTheValueMeant: a misspelt value of one of a rule's enums gets the value
// likely meant, as a misspelt field does (internal/fieldnames; issue 26), in the API's answer
// and so in a scenario's check of its fault steps (faults.CheckNew is both's). Before, the
// message listed the values and left the reader to find the typo.
func TestAddSuggestsTheValueMeant(t *testing.T) {
	e := faults.New(time.Now)
	for _, tc := range []struct {
		name string
		rule cloud.FaultRule
		want string
	}{
		{"operation", cloud.FaultRule{Operation: "attachvolume", Error: cloud.CodeUnavailable}, `; did you mean "AttachVolume"?`},
		{"error code", cloud.FaultRule{Operation: cloud.OperationAny, Error: "Unavailabel"}, `; did you mean "Unavailable"?`},
		{"transition", cloud.FaultRule{Operation: cloud.OperationAttachVolume, Transition: "stik"}, `; did you mean "stick"?`},
		{"instance health", cloud.FaultRule{InstanceID: "i-1", Health: "stoped"}, `got "stoped"; did you mean "stopped"?`},
		{"volume health", cloud.FaultRule{VolumeID: "v-1", Health: "degradd"}, `got "degradd"; did you mean "degraded"?`},
		{"an id is the server's", cloud.FaultRule{ID: "mine", Operation: cloud.OperationAny, Error: cloud.CodeUnavailable}, "fault rule: id is assigned by the server"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.Add(tc.rule)
			if cloud.CodeOf(err) != cloud.CodeInvalidArgument || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Add: %v, want InvalidArgument with %q", err, tc.want)
			}
		})
	}
	if err := e.SetInstanceHealth("i-1", "impard", ""); err == nil || !strings.Contains(err.Error(), `; did you mean "impaired"?`) {
		t.Fatalf("SetInstanceHealth: %v, want the value meant", err)
	}
	if rules := e.List(); len(rules) != 0 {
		t.Fatalf("refused rules were added: %v", rules)
	}
}
