package csi

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/grpc"
	"k8s.io/utils/ptr"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/capacity"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/clustercheck"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/mount"
)

// docRow is one metric row of docs/metrics.md.
type docRow struct {
	typ    string
	labels []string
}

// readMetricsDoc parses the tables of docs/metrics.md into the rows of sections whose heading
// starts with "## Driver" and those under "## Fake cloud".
func readMetricsDoc(t *testing.T) (driver, fakecloud map[string]docRow) {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	driver, fakecloud = map[string]docRow{}, map[string]docRow{}
	var section map[string]docRow
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## Driver"):
			section = driver
		case strings.HasPrefix(line, "## Fake cloud"):
			section = fakecloud
		case strings.HasPrefix(line, "## "):
			section = nil
		case section != nil && strings.HasPrefix(line, "| `"):
			cells := strings.Split(line, "|")
			if len(cells) < 6 {
				t.Fatalf("metrics.md: short row %q", line)
			}
			name := strings.Trim(strings.TrimSpace(cells[1]), "`")
			var labels []string
			for l := range strings.SplitSeq(cells[4], ",") {
				if l = strings.Trim(strings.TrimSpace(l), "`"); l != "" && l != "—" {
					labels = append(labels, l)
				}
			}
			sort.Strings(labels)
			if _, dup := section[name]; dup {
				t.Errorf("metrics.md lists %s twice", name)
			}
			section[name] = docRow{typ: strings.TrimSpace(cells[2]), labels: labels}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return driver, fakecloud
}

// familyRows turns gathered families into doc rows, leaving out the standard go_, process_
// and promhttp_ collectors.
func familyRows(mfs []*dto.MetricFamily) map[string]docRow {
	out := map[string]docRow{}
	for _, mf := range mfs {
		name := mf.GetName()
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") || strings.HasPrefix(name, "promhttp_") {
			continue
		}
		var labels []string
		if len(mf.GetMetric()) > 0 {
			for _, lp := range mf.GetMetric()[0].GetLabel() {
				labels = append(labels, lp.GetName())
			}
		}
		sort.Strings(labels)
		out[name] = docRow{typ: strings.ToLower(mf.GetType().String()), labels: labels}
	}
	return out
}

func compareRows(t *testing.T, component string, got, doc map[string]docRow) {
	t.Helper()
	for name, g := range got {
		d, ok := doc[name]
		switch {
		case !ok:
			t.Errorf("%s exports %s, which docs/metrics.md does not list", component, name)
		case d.typ != g.typ:
			t.Errorf("%s: docs/metrics.md says %s is a %s, it is a %s", component, name, d.typ, g.typ)
		case !slices.Equal(d.labels, g.labels):
			t.Errorf("%s: docs/metrics.md gives %s the labels %v, it has %v", component, name, d.labels, g.labels)
		}
	}
	for name := range doc {
		if _, ok := got[name]; !ok {
			t.Errorf("docs/metrics.md lists %s under %s, which does not export it", name, component)
		}
	}
}

// driverFamilies builds a driver in mode all with the real capacity reporter and drives it
// until every vector has a child, so that every metric shows in Gather.
func driverFamilies(t *testing.T) []*dto.MetricFamily {
	t.Helper()
	f := newRealCloud(t)
	f.AddInstance("i-1", "zone-a", 4, 1)
	reg := prometheus.NewRegistry()
	opts := DefaultOptions()
	opts.NodeID, opts.StateDir = "i-1", t.TempDir()
	if r := clustercheck.Decide(context.Background(), opts.ClusterCheckConfig(), kubeClient(t, kubeCluster(t, "v1.37.2", ptr.To[int64](10), nil)), reg).StaticReason; r != "" {
		t.Fatalf("the cluster check refused a supported cluster: %s", r)
	}
	rep, err := capacity.NewReporter(opts.CapacityConfig(), f, "i-1", nil, nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(opts, Deps{ControllerCloud: f, NodeCloud: f, Mounter: mount.NewFake(), Capacity: rep, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	f.FailNext(cloud.OperationGetCapacity, cloud.ErrUnavailable)
	if _, err := rep.MaxVolumesPerNode(ctx); err != nil {
		t.Fatal(err)
	}
	s := d.controller
	ids := fillNode(t, s, "i-1", 3)
	x := mustCreate(t, s, "x").GetVolumeId()
	for range 2 { // the cloud refuses, then the window does
		if _, err := publish(s, x, "i-1"); err == nil {
			t.Fatal("publish to a full node succeeded")
		}
	}
	if _, err := s.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: ids[0], NodeId: "i-1"}); err != nil {
		t.Fatal(err)
	}
	_, _ = d.metrics.interceptor(ctx, nil, &grpc.UnaryServerInfo{FullMethod: "/csi.v1.Node/NodeGetInfo"},
		func(context.Context, any) (any, error) { return nil, nil })
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}

// fakeCloudFamilies scrapes a real fake cloud after a request and a fired fault.
func fakeCloudFamilies(t *testing.T) []*dto.MetricFamily {
	t.Helper()
	c, base := realCloudClient(t)
	ctx := context.Background()
	if _, err := c.CreateInstance(ctx, cloud.CreateInstanceRequest{ID: "node-a", Zone: "zone-a", InstanceType: "small", OutOfBandSlots: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateFault(ctx, cloud.FaultRule{Operation: cloud.OperationGetCapacity, Error: cloud.CodeUnavailable, Count: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetCapacity(ctx, "node-a"); err == nil {
		t.Fatal("the fault did not fire")
	}
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	byName, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var mfs []*dto.MetricFamily
	for _, mf := range byName {
		mfs = append(mfs, mf)
	}
	return mfs
}

// TestMetricsDocMatchesRegistries keeps docs/metrics.md and the registries in step: every
// metric of the driver and of the fake cloud has a row with its type and labels, and every
// row is a metric.
func TestMetricsDocMatchesRegistries(t *testing.T) {
	docDriver, docCloud := readMetricsDoc(t)
	if len(docDriver) == 0 || len(docCloud) == 0 {
		t.Fatalf("docs/metrics.md: %d driver and %d fake cloud rows found", len(docDriver), len(docCloud))
	}
	compareRows(t, "the driver", familyRows(driverFamilies(t)), docDriver)
	compareRows(t, "the fake cloud", familyRows(fakeCloudFamilies(t)), docCloud)
}
