package scenario_test

import (
	"context"
	"testing"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/scenario"
)

// nopAPI accepts every call.
type nopAPI struct{}

func (nopAPI) PatchInstance(context.Context, string, cloud.InstancePatch) (*cloud.Instance, error) {
	return &cloud.Instance{}, nil
}
func (nopAPI) PatchQuotas(context.Context, cloud.QuotasPatch) (*cloud.Quotas, error) {
	return &cloud.Quotas{}, nil
}
func (nopAPI) CreateFault(_ context.Context, r cloud.FaultRule) (*cloud.FaultRule, error) {
	r.ID = "fault-1"
	return &r, nil
}
func (nopAPI) DeleteFault(context.Context, string) error { return nil }
func (nopAPI) ClearFaults(context.Context) error         { return nil }
func (nopAPI) Reset(context.Context) error               { return nil }

// TestManagerForgetsOldRuns: finished runs beyond MaxKept are forgotten, oldest first, and
// each finished run says done with its results.
func TestManagerForgetsOldRuns(t *testing.T) {
	m := scenario.NewManager(scenario.ManagerOptions{})
	defer m.Close()
	sc, err := scenario.Parse([]byte("name: quick\nsteps:\n  - at: 0s\n    reset: true\n  - at: 0s\n    clearFaults: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	var first, last string
	for i := range scenario.MaxKept + 3 {
		st, err := m.Start(sc, nopAPI{}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if st, err = m.Wait(context.Background(), st.ID); err != nil || st.State != scenario.StateDone || st.Done != 2 || len(st.Results) != 2 {
			t.Fatalf("run %d: %+v, %v", i, st, err)
		}
		if i == 0 {
			first = st.ID
		}
		last = st.ID
	}
	list := m.List().Scenarios
	if len(list) != scenario.MaxKept || list[len(list)-1].ID != last || list[len(list)-1].Results != nil {
		t.Fatalf("%d runs kept (last %s), want %d ending with %s and no results in the list", len(list), list[len(list)-1].ID, scenario.MaxKept, last)
	}
	if _, err := m.Get(first); cloud.CodeOf(err) != cloud.CodeNotFound {
		t.Fatalf("the first run: %v, want it forgotten (NotFound)", err)
	}
	if _, err := m.Cancel(t.Context(), "scenario-x"); cloud.CodeOf(err) != cloud.CodeNotFound {
		t.Fatalf("Cancel of an unknown run: %v", err)
	}
	m.Close()
	if _, err := m.Start(sc, nopAPI{}, nil, nil); cloud.CodeOf(err) != cloud.CodeUnavailable {
		t.Fatalf("Start after Close: %v, want Unavailable", err)
	}
}
