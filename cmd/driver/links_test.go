package main

import (
	"errors"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestBuildLinksNoGRPCTrace: the driver as `make build` and hack/images.sh build it links
// neither golang.org/x/net/trace nor html/template (issue 28). gRPC imports x/net/trace
// unless built with -tags=grpcnotrace; that package links html/template, whose method lookup
// by name keeps every exported method of every type in the binary: 4.5 MB of bin/driver and
// 3 MB of each driver process's idle RSS (docs/figures.md). The tag is in the Makefile's
// GOFLAGS (every go command make runs) and in hack/images.sh's go build; this reads both and
// asks the go command for the packages the driver links with the Makefile's tags.
func TestBuildLinksNoGRPCTrace(t *testing.T) {
	// go test puts its own GOROOT/bin first in the test's PATH.
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command in PATH to list the driver's packages: %v", err)
	}
	makefile, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^export GOFLAGS := .*?(-tags=\S+)`).FindSubmatch(makefile)
	if m == nil || !slices.Contains(strings.Split(strings.TrimPrefix(string(m[1]), "-tags="), ","), "grpcnotrace") {
		t.Fatalf("the Makefile's `export GOFLAGS :=` line sets no -tags=grpcnotrace (found %q)", m)
	}
	tags := string(m[1])
	images, err := os.ReadFile("../../hack/images.sh")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(images), "go build -v -trimpath "+tags+" ") {
		t.Errorf("hack/images.sh's go build does not pass %s as the Makefile does: the images' driver would link golang.org/x/net/trace", tags)
	}
	out, err := exec.Command(gobin, "list", "-deps", tags, ".").Output()
	if err != nil {
		var stderr []byte
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			stderr = ee.Stderr
		}
		t.Fatalf("go list -deps %s: %v\n%s", tags, err, stderr)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "google.golang.org/grpc") {
		t.Fatalf("go list -deps lists no google.golang.org/grpc: not the driver's packages?\n%s", out)
	}
	for _, p := range []string{"golang.org/x/net/trace", "html/template"} {
		if slices.Contains(deps, p) {
			t.Errorf("the driver built with %s links %s: gRPC's tracing is back (or its tag was renamed)", tags, p)
		}
	}
}
