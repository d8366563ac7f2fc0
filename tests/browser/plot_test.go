package browser_test

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// renderPlot rewrites docs/capacity-plot.png from docs/capacity-plot.html.
var renderPlot = flag.Bool("render-plot", false, "rewrite docs/capacity-plot.png from docs/capacity-plot.html (the whole page)")

// TestRenderCapacityPlot renders the README's capacity plot page in full (legend, charts and
// tables, nothing cut) into docs/capacity-plot.png; only with -render-plot.
func TestRenderCapacityPlot(t *testing.T) {
	if !*renderPlot {
		t.Skip("only with -render-plot (make test-browser BROWSER_ARGS='-run TestRenderCapacityPlot -render-plot')")
	}
	chromium, err := chromiumPath()
	if err != nil {
		t.Skipf("skipping: %v", err)
	}
	page, err := filepath.Abs("../../docs/capacity-plot.html")
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
	if err := os.WriteFile("../../docs/capacity-plot.png", png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("docs/capacity-plot.png: %d bytes", len(png))
}
