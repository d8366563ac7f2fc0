package paging_test

import (
	"strings"
	"testing"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/paging"
)

func TestSize(t *testing.T) {
	for in, want := range map[int]int{0: paging.DefaultSize, 1: 1, 1000: 1000, 1001: paging.MaxSize, 1 << 40: paging.MaxSize} {
		if got, err := paging.Size(in); err != nil || got != want {
			t.Errorf("Size(%d) = %d, %v; want %d", in, got, err, want)
		}
	}
	if _, err := paging.Size(-1); cloud.CodeOf(err) != cloud.CodeInvalidArgument {
		t.Fatalf("Size(-1): %v", err)
	}
}

func TestTokenRoundTripAndRefusals(t *testing.T) {
	valid := func(k string) bool { return paging.HexKey(k, "vol-", 8) }
	tok := paging.Token("vol-0000002a")
	if key, err := paging.Parse(tok, valid); err != nil || key != "vol-0000002a" {
		t.Fatalf("Parse(Token) = %q, %v", key, err)
	}
	for _, bad := range []string{"!!", paging.Token("vol-2a"), paging.Token("snap-0000002a"), "dm9sLTAwMDAwMDJh", strings.Repeat("A", 200),
		paging.Token("vol-0000002g"), paging.Token("vol-+000002a")} {
		_, err := paging.Parse(bad, valid)
		if cloud.CodeOf(err) != cloud.CodeInvalidArgument || len(err.Error()) > 200 {
			t.Errorf("Parse(%.30q): %v", bad, err)
		}
	}
}
