package browser_test

import (
	"context"
	"flag"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/admin"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/capacity"
)

// renderPlot rewrites docs/capacity-plot.png from docs/capacity-plot.html.
var renderPlot = flag.Bool("render-plot", false, "rewrite docs/capacity-plot.png from docs/capacity-plot.html (the whole page)")

// TestRenderCapacityPlot renders the capacity plot page of docs/local-cluster.md in full (legend, charts and
// tables, nothing cut) into docs/capacity-plot.png; only with -render-plot.
func TestRenderCapacityPlot(t *testing.T) {
	renderDocsPage(t, "capacity-plot", "TestRenderCapacityPlot")
}

// TestRenderScalePlot renders the scale page of `make scale` (docs/scale-plot.html, copied
// from _output/scale) in full into docs/scale-plot.png; only with -render-plot.
func TestRenderScalePlot(t *testing.T) {
	renderDocsPage(t, "scale-plot", "TestRenderScalePlot")
}

// renderDocsPage rewrites docs/NAME.png with a full-page screenshot of docs/NAME.html in headless
// Chromium (1200 px wide, within a minute); it skips without -render-plot (test is the -run
// name the skip message gives) or without chromium.
func renderDocsPage(t *testing.T, name, test string) {
	t.Helper()
	if !*renderPlot {
		t.Skipf("only with -render-plot (make test-browser BROWSER_ARGS='-run %s -render-plot')", test)
	}
	chromium, err := chromiumPath()
	if err != nil {
		t.Skipf("skipping: %v", err)
	}
	page, err := filepath.Abs("../../docs/" + name + ".html")
	if err != nil {
		t.Fatal(err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.WindowSize(1200, 900))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(allocCtx)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, time.Minute)
	defer cancelTimeout()
	if err := chromedp.Do(ctx, chromedp.Navigate("file://"+page)); err != nil {
		t.Fatal(err)
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	out := "../../docs/" + name + ".png"
	if err := os.WriteFile(out, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("docs/%s.png: %d bytes", name, len(png))
}

// TestRenderPolicyPlot drives one node plugin's real capacity policy through every mode
// (fresh, a decrease, ramping back, last-known-good in an outage, the floor once the last good
// value is stale, ramping again) and screenshots its chart in the console into
// docs/policy-modes.png (docs/policy.md); only with -render-plot.
func TestRenderPolicyPlot(t *testing.T) {
	if !*renderPlot {
		t.Skip("only with -render-plot (make test-browser BROWSER_ARGS='-run TestRenderPolicyPlot -render-plot')")
	}
	chromium, err := chromiumPath()
	if err != nil {
		t.Skipf("skipping: %v", err)
	}
	plugin := &pluginHandler{}
	ps := httptest.NewServer(plugin)
	t.Cleanup(ps.Close)
	cloudURL := startCloud(t, ps.URL, nil)
	cfg := capacity.DefaultConfig()
	cfg.MinInterval, cfg.Jitter, cfg.MaxStep = 500*time.Millisecond, 0, 1
	cfg.StabilityWindow, cfg.MaxStabilityWindow, cfg.StaleAfter = 2*time.Second, 2*time.Second, 4*time.Second
	plugin.start(t, cloudURL, cfg)
	admin, err := admin.NewClient(cloudURL, cloud.WithToken(adminToken))
	if err != nil {
		t.Fatal(err)
	}

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.WindowSize(820, 1000))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(allocCtx)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 2*time.Minute)
	defer cancelTimeout()
	if err := chromedp.Do(ctx, chromedp.Navigate(cloudURL+"/ui?interval=200#token="+adminToken)); err != nil {
		t.Fatal(err)
	}
	bg := context.Background()
	var outage string
	for _, s := range []struct {
		wait time.Duration
		what string
		do   func() error
	}{
		{3 * time.Second, "4 slots taken out of band: 7 → 3 at once", func() error {
			_, err := admin.PatchInstance(bg, node, cloud.InstancePatch{OutOfBandSlots: ptr(5)})
			return err
		}},
		{4 * time.Second, "freed: after the 2 s window, ramping 3 → 7 one slot per lookup", func() error {
			_, err := admin.PatchInstance(bg, node, cloud.InstancePatch{OutOfBandSlots: ptr(1)})
			return err
		}},
		{6 * time.Second, "outage: last-known-good for 4 s (stale-after), then the floor", func() error {
			r, err := admin.CreateFault(bg, cloud.FaultRule{Operation: cloud.OperationGetCapacity, InstanceID: node, Error: cloud.CodeUnavailable})
			if err == nil {
				outage = r.ID
			}
			return err
		}},
		{8 * time.Second, "recovered: ramping 1 → 7", func() error { return admin.DeleteFault(bg, outage) }},
		{10 * time.Second, "done", func() error { return nil }},
	} {
		if err := chromedp.Do(ctx, chromedp.Sleep(s.wait)); err != nil {
			t.Fatal(err)
		}
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.what, err)
		}
		t.Logf("%s", s.what)
	}
	png, err := chromedp.Run(ctx, chromedp.Screenshot(chromedp.CSS(`#nodes-section`)))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("../../docs/policy-modes.png", png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("docs/policy-modes.png: %d bytes", len(png))
}

func ptr[T any](v T) *T { return &v }
