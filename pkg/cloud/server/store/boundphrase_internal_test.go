package store

import (
	"testing"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// TestBoundPhrase: one wording per state of a bound volume, as the VolumeInUse messages of
// attach and delete use it (before, attach said "attached on" where delete said "attached
// to").
func TestBoundPhrase(t *testing.T) {
	for state, want := range map[cloud.AttachState]string{
		cloud.StateAttaching: "attaching to",
		cloud.StateAttached:  "attached to",
		cloud.StateDetaching: "detaching from",
		cloud.StateError:     "in state error, bound to",
	} {
		if got := boundPhrase(state); got != want {
			t.Errorf("boundPhrase(%s) = %q, want %q", state, got, want)
		}
	}
}
