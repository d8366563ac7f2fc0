package browser_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fakecloud/fakecloud-csi/internal/kubeapi/kubeapitest"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/admin"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/console"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/console/consoletest"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/capacity"
)

// updateScreenshot writes the final screenshot to docs/console.png too (docs/console.md's).
var updateScreenshot = flag.Bool("update-screenshot", false, "also write the screenshot to docs/console.png")

const (
	adminToken  = "demo-admin-token"
	driverToken = "demo-driver-token"
	// node is the instance whose plugin the test runs: medium, 8 slots, 1 out of band.
	node = "node-a2"
	// waitFor bounds each wait for the page to show a change: a poll every 200 ms, a
	// node plugin lookup every 200 ms.
	waitFor = 15 * time.Second
)

// chromiumPath finds a Chromium or Chrome binary: $CHROMIUM, else the usual names on PATH.
func chromiumPath() (string, error) {
	if p := os.Getenv("CHROMIUM"); p != "" {
		return exec.LookPath(p)
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no chromium, chromium-browser or google-chrome on PATH and CHROMIUM unset")
}

// startCloud serves a fake cloud seeded like `make run`, with the console showing one node
// plugin and the cluster kube holds (through consoletest's API server, as the console reads a
// real one), on loopback; it returns the cloud's URL.
func startCloud(t *testing.T, pluginURL string, kube *kubeapitest.Server) string {
	t.Helper()
	seed, err := server.LoadSeed("../../examples/seed.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := server.LoadTokens("../../examples/tokens.yaml")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Seed: seed, Tokens: tokens,
		Console: console.Config{Nodes: []console.Node{{Name: node, URL: pluginURL}}, Kube: consoletest.Client(t, kube)}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		if err := srv.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}

// csiNode is node-a2's CSINode (Kubernetes node k8s-2) with the driver's allocatable count.
func csiNode(count int32) *storagev1.CSINode {
	return &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: "k8s-2"}, Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{
		{Name: console.DefaultDriverName, NodeID: node, Allocatable: &storagev1.VolumeNodeResources{Count: &count}}}}}
}

// volumeAttachment is a VolumeAttachment of the driver to k8s-2 (node-a2), attached or not yet.
func volumeAttachment(name string, attached bool) *storagev1.VolumeAttachment {
	pv := "pv-" + name
	return &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: storagev1.VolumeAttachmentSpec{Attacher: console.DefaultDriverName, NodeName: "k8s-2",
			Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pv}},
		Status: storagev1.VolumeAttachmentStatus{Attached: attached}}
}

// pendingPod is a pod bound to k8s-2 that is still Pending (waiting for its volume).
func pendingPod(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: corev1.PodSpec{NodeName: "k8s-2"},
		Status: corev1.PodStatus{Phase: corev1.PodPending}}
}

// pluginHandler serves the driver's real capacity policy for one node as a node plugin's
// /debug/capacity does (pkg/csi's HTTPHandler), looking the cloud up every 200 ms.
type pluginHandler struct {
	mu       sync.Mutex
	reporter *capacity.Reporter
}

func (p *pluginHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	rep := p.reporter
	p.mu.Unlock()
	if r.URL.Path != "/debug/capacity" || rep == nil {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(rep.DebugState())
}

// testPolicy is the capacity policy of the test's plugin: lookups every 200 ms, and a short
// window and step, so the screenshot catches a ramp back up.
func testPolicy() capacity.Config {
	cfg := capacity.DefaultConfig()
	cfg.MinInterval, cfg.Jitter = 200*time.Millisecond, 0
	cfg.StabilityWindow, cfg.MaxStabilityWindow, cfg.MaxStep = time.Second, time.Second, 1
	return cfg
}

func (p *pluginHandler) start(t *testing.T, cloudURL string, cfg capacity.Config) {
	t.Helper()
	client, err := admin.NewClient(cloudURL, cloud.WithToken(driverToken))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := capacity.NewReporter(cfg, client, node, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rep.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("reporter: %v", err)
		}
	})
	p.mu.Lock()
	p.reporter = rep
	p.mu.Unlock()
}

// TestConsole loads the console in headless Chromium against a real fake cloud and a node
// plugin's real capacity policy, changes an instance's out-of-band slots and the attachment
// quota through the page, and checks that the slot bar, the quota and the plugin's reported
// value follow; adds and deletes fault rules through the page, and runs a scenario pasted
// into it. The page must raise no
// JavaScript error (a Content-Security-Policy violation included). The screenshot is kept as
// an artefact (go test -artifacts).
func TestConsole(t *testing.T) {
	chromium, err := chromiumPath()
	if err != nil {
		// CI sets BROWSER_REQUIRED=1 (.ci/run installs chromium): there a skip would pass
		// without testing anything.
		if os.Getenv("BROWSER_REQUIRED") != "" {
			t.Fatalf("BROWSER_REQUIRED is set but: %v", err)
		}
		t.Skipf("skipping the browser test: %v (Debian: apt-get install -y --no-install-recommends chromium)", err)
	}
	plugin := &pluginHandler{}
	ps := httptest.NewServer(plugin)
	t.Cleanup(ps.Close)
	// The cluster side, in a fake API server (kubeapitest): node-a2 runs as Kubernetes node
	// k8s-2, its CSINode count 7 (what the plugin reports at first); one pod waits for a node.
	kube := kubeapitest.New(t,
		csiNode(7),
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-9"}, Status: corev1.PodStatus{Phase: corev1.PodPending,
			Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable",
				Message: "0/3 nodes are available: 3 node(s) exceed max volume count."}}}})
	cloudURL := startCloud(t, ps.URL, kube)
	plugin.start(t, cloudURL, testPolicy())

	// Something to see: volumes on two nodes and one fault rule.
	ctx := context.Background()
	driver, err := admin.NewClient(cloudURL, cloud.WithToken(driverToken))
	if err != nil {
		t.Fatal(err)
	}
	admin, err := admin.NewClient(cloudURL, cloud.WithToken(adminToken))
	if err != nil {
		t.Fatal(err)
	}
	var vols []string
	for i, on := range []string{node, node, "node-a1"} {
		v, err := driver.CreateVolume(ctx, cloud.CreateVolumeRequest{Name: fmt.Sprint("pvc-", i), SizeBytes: 1 << 30, Zone: "zone-a"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := driver.AttachVolume(ctx, v.ID, on); err != nil {
			t.Fatal(err)
		}
		vols = append(vols, v.ID)
	}
	if _, err := admin.CreateFault(ctx, cloud.FaultRule{Operation: cloud.OperationCreateSnapshot, Error: cloud.CodeThrottled, Count: 5}); err != nil {
		t.Fatal(err)
	}

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox,
		chromedp.WindowSize(1400, 1000), chromedp.Flag("disable-dev-shm-usage", true))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(allocCtx)
	defer cancelBrowser()
	bctx, cancelTimeout := context.WithTimeout(bctx, 2*time.Minute)
	defer cancelTimeout()

	// Start the browser, then listen to the tab: uncaught exceptions, console.error and the
	// browser's own error entries (a Content-Security-Policy violation, a failed load).
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start %s: %v", chromium, err)
	}
	var jsErrors []string
	var jsMu sync.Mutex
	// authRefusals: while the steps that try missing and wrong tokens run, the browser's
	// "Failed to load resource: ... status of 401/403" entries are what they ask for.
	authRefusals := false
	allowAuthRefusals := func(on bool) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(context.Context, *chromedp.Target) error {
			jsMu.Lock()
			defer jsMu.Unlock()
			authRefusals = on
			return nil
		})
	}
	if err := chromedp.Listen(bctx, func(ev any) {
		jsMu.Lock()
		defer jsMu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			d := ev.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			jsErrors = append(jsErrors, fmt.Sprintf("exception at %s:%d: %s", d.URL, d.LineNumber+1, msg))
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError {
				var parts []string
				for _, a := range ev.Args {
					parts = append(parts, string(a.Value)+a.Description)
				}
				jsErrors = append(jsErrors, "console.error: "+strings.Join(parts, " "))
			}
		case *cdplog.EventEntryAdded:
			refused := ev.Entry.Source == cdplog.EntrySourceNetwork && (strings.Contains(ev.Entry.Text, "status of 401") || strings.Contains(ev.Entry.Text, "status of 403"))
			if ev.Entry.Level == cdplog.EntryLevelError && !(authRefusals && refused) {
				jsErrors = append(jsErrors, fmt.Sprintf("browser log (%s): %s %s", ev.Entry.Source, ev.Entry.Text, ev.Entry.URL))
			}
		}
	}); err != nil {
		t.Fatal(err)
	}

	bar := `.bar[data-instance="` + node + `"]`
	form := `form[data-instance="` + node + `"]`
	reportedIs := func(v int) string {
		return fmt.Sprintf(`document.querySelector('[data-node=%q] [data-field="reported"] b')?.textContent === %q`, node, fmt.Sprint(v))
	}
	modeIs := func(mode string) string {
		return fmt.Sprintf(`document.querySelector('[data-node=%q] .badge')?.textContent === %q`, node, mode)
	}
	clusterCell := func(col int, want string) string {
		return fmt.Sprintf(`document.querySelector('#cluster tr[data-instance=%q] td:nth-child(%d)')?.textContent === %q`, node, col, want)
	}
	stale := func(want bool) string {
		return fmt.Sprintf(`document.querySelector('#cluster tr[data-instance=%q]')?.classList.contains("stale") === %v`, node, want)
	}
	segIs := func(kind string, n int) string {
		return fmt.Sprintf(`document.querySelector('%s .seg.%s')?.dataset.count === %q`, bar, kind, fmt.Sprint(n))
	}
	// seriesIs: the node chart's line of that class ends at v (its data-last); seriesMoved: it
	// has two levels (distinct y in its path), so the chart shows a change over time.
	seriesIs := func(class string, v int) string {
		return fmt.Sprintf(`document.querySelector('[data-node=%q] svg.chart path[data-series=%q]')?.dataset.last === %q`, node, class, fmt.Sprint(v))
	}
	seriesMoved := func(class string) string {
		return fmt.Sprintf(`new Set((document.querySelector('[data-node=%q] svg.chart path[data-series=%q]')?.getAttribute("d")
			.match(/[MV][^HMV]*/g) ?? []).map((t) => t.split(",").pop().replace(/^[MV]/, ""))).size > 1`, node, class)
	}
	all := func(exprs ...string) string { return "(" + strings.Join(exprs, ") && (") + ")" }
	textHas := func(sel, want string) string {
		return fmt.Sprintf(`document.querySelector(%q)?.textContent.includes(%q)`, sel, want)
	}
	useToken := func(tok string) []chromedp.Action[chromedp.Void] {
		return []chromedp.Action[chromedp.Void]{chromedp.SetValue(chromedp.CSS(`#token`), tok), chromedp.Click(chromedp.CSS(`#token-form button[type="submit"]`))}
	}
	// tryQuota is an admin action: attachment quota 5, through the quota form.
	tryQuota := []chromedp.Action[chromedp.Void]{chromedp.SetValue(chromedp.CSS(`#quota-form input[name="attachments"]`), "5"),
		chromedp.Click(chromedp.CSS(`#quota-form button[type="submit"]`))}
	set := func(sel, v string) chromedp.Action[chromedp.Void] { return chromedp.SetValue(chromedp.CSS(sel), v) }
	click := func(sel string) chromedp.Action[chromedp.Void] { return chromedp.Click(chromedp.CSS(sel)) }
	steps := []struct {
		what    string
		actions []chromedp.Action[chromedp.Void]
		until   string // a JavaScript expression the page must make true
	}{
		{"the page shows the seeded state (8 slots: 1 out of band, 2 attached, 5 free; reported 7)",
			[]chromedp.Action[chromedp.Void]{chromedp.Navigate(cloudURL + "/ui?interval=200#token=" + adminToken)},
			all(segIs("oob", 1), segIs("attached", 2), segIs("free", 5), reportedIs(7),
				`document.querySelector('[data-quota="attachments"] [data-field="limit"]')?.textContent === "40"`,
				`document.querySelectorAll('#faults tbody tr').length === 1`,
				`document.querySelectorAll('#events li').length >= 4`,
				// The cluster view: k8s-2's CSINode count 7, reported 7, cloud truth 7; the
				// unscheduled pod with the scheduler's reason.
				clusterCell(1, "k8s-2"), clusterCell(3, "7"), clusterCell(4, "7"), clusterCell(5, "7"), stale(false),
				`document.querySelector('#unscheduled [data-pod="default/web-9"]')?.textContent.includes("exceed max volume count")`,
				`document.querySelector('[data-instance="`+node+`"] [data-field="csinode"] b')?.textContent === "7"`)},
		{"out of band 1 → 4 through the instance's form: bar 4/2/2, reported 4 at once (decreases are not delayed)",
			[]chromedp.Action[chromedp.Void]{set(form+` input[name="outOfBandSlots"]`, "4"), click(form + ` button[type="submit"]`)},
			all(segIs("oob", 4), segIs("attached", 2), segIs("free", 2), reportedIs(4),
				// The cluster still counts 7 (no kubelet here updates it): the row says stale.
				clusterCell(3, "7"), clusterCell(4, "4"), stale(true))},
		{"the CSINode count follows (as kubelet would update it, KEP-4876): 4, the row no longer stale",
			[]chromedp.Action[chromedp.Void]{chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
				return kube.Put(csiNode(4))
			})},
			all(clusterCell(3, "4"), stale(false), `document.querySelector('[data-node="`+node+`"] [data-field="csinode"] b')?.textContent === "4"`,
				// The node's chart has the cluster's series from the start: nothing attached
				// through Kubernetes yet, nothing Pending on k8s-2.
				seriesIs("va-attached", 0), seriesIs("va-attaching", 0), seriesIs("pending", 0))},
		{"two VolumeAttachments (one attached, one not yet) and a Pending pod on k8s-2 show as the node's series",
			[]chromedp.Action[chromedp.Void]{chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
				for _, o := range []struct {
					name     string
					attached bool
				}{{"va-1", true}, {"va-2", false}} {
					if err := kube.Put(volumeAttachment(o.name, o.attached)); err != nil {
						return err
					}
				}
				return kube.Put(pendingPod("disks-1"))
			})},
			all(seriesIs("va-attached", 1), seriesIs("va-attaching", 1), seriesIs("pending", 1), seriesMoved("va-attached"),
				seriesMoved("va-attaching"), seriesMoved("pending"),
				`document.querySelector('[data-node="`+node+`"] [data-field="pending-pods"] b')?.textContent === "1"`,
				clusterCell(6, "1 + 1 attaching"))},
		{"attachment quota 40 → 3 (all in use) through the quota form: headroom 0, reported = attached = 2",
			[]chromedp.Action[chromedp.Void]{set(`#quota-form input[name="attachments"]`, "3"), click(`#quota-form button[type="submit"]`)},
			all(`document.querySelector('[data-quota="attachments"] [data-field="limit"]')?.textContent === "3"`,
				`document.querySelector('[data-quota="attachments"] .meter.full') !== null`, reportedIs(2),
				modeIs("fresh"))},
		{"a fault rule added through the page shows in the table",
			[]chromedp.Action[chromedp.Void]{set(`#fault-form select[name="operation"]`, "AttachVolume"),
				set(`#fault-form select[name="error"]`, "AttachmentLimitExceeded"),
				set(`#fault-form input[name="instanceId"]`, "node-b1"), click(`#fault-form button[type="submit"]`)},
			`[...document.querySelectorAll('#faults tbody tr')].some(r => r.textContent.includes("node-b1") && r.textContent.includes("AttachmentLimitExceeded"))`},
		{"the first rule deleted through its button leaves the table",
			[]chromedp.Action[chromedp.Void]{click(`#faults tbody tr:first-child button`)},
			all(`document.querySelectorAll('#faults tbody tr').length === 1`,
				`[...document.querySelectorAll('#events li')].some(li => li.dataset.type === "FaultDeleted")`)},
		{"an outage of the plugin's capacity lookups (GetCapacity Unavailable) added through the page: last-known-good, value held",
			[]chromedp.Action[chromedp.Void]{set(`#fault-form select[name="operation"]`, "GetCapacity"),
				set(`#fault-form select[name="error"]`, "Unavailable"),
				set(`#fault-form input[name="instanceId"]`, node), click(`#fault-form button[type="submit"]`)},
			all(modeIs("last-known-good"), reportedIs(2),
				`[...document.querySelectorAll('#faults tbody tr')].some(r => r.textContent.includes("GetCapacity"))`)},
		{"the outage rule (the newest row) deleted: the plugin is fresh again",
			[]chromedp.Action[chromedp.Void]{click(`#faults tbody tr:last-child button`)},
			all(`document.querySelectorAll('#faults tbody tr').length === 1`, modeIs("fresh"),
				`document.querySelector('#faults tbody tr').textContent.includes("node-b1")`)},
		// No token is not a wrong token: each says so, in the status line and when an admin
		// action fails, with its own remedy.
		// A blank, not an empty value: chromedp's SetValue cannot set "" (the page trims it).
		{"no token: the status and a refused admin action say no token was given",
			append(append([]chromedp.Action[chromedp.Void]{allowAuthRefusals(true)}, useToken(" ")...), tryQuota...),
			all(textHas("#status", "no token given"), textHas("#toast", "PATCH /v1/quotas"), textHas("#toast", "failed: no token given"))},
		{"a token the fake cloud does not know: rejected (401), not 'no token given'",
			append(useToken("not-a-token"), tryQuota...),
			all(textHas("#status", "token rejected (401)"), textHas("#toast", "failed: token rejected (401)"),
				`!document.querySelector("#toast").textContent.includes("no token given")`)},
		{"a reader's token: the page reads, the admin action is rejected (403)",
			append(useToken("demo-reader-token"), tryQuota...),
			all(`document.querySelector("#status").dataset.state === "live"`, textHas("#toast", "failed: token rejected (403)"))},
		{"the admin token again: live",
			useToken(adminToken),
			`document.querySelector("#status").dataset.state === "live"`},
		{"quota back to 40: the plugin ramps 2 → 4 one slot per refresh after its 1 s window",
			[]chromedp.Action[chromedp.Void]{allowAuthRefusals(false), set(`#quota-form input[name="attachments"]`, "40"), click(`#quota-form button[type="submit"]`)},
			all(reportedIs(4), `document.querySelector('[data-quota="attachments"] .meter.full') === null`)},
		{"the second attach done and the pod running (they waited through the quota cut and the outage): attached 2, none attaching, none Pending",
			[]chromedp.Action[chromedp.Void]{chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
				if err := kube.Put(volumeAttachment("va-2", true)); err != nil {
					return err
				}
				running := pendingPod("disks-1")
				running.Status.Phase = corev1.PodRunning
				return kube.Put(running)
			})},
			all(seriesIs("va-attached", 2), seriesIs("va-attaching", 0), seriesIs("pending", 0), clusterCell(6, "2"))},
		{"a scenario pasted into the page runs in the fake cloud: its row says done and its step shows",
			[]chromedp.Action[chromedp.Void]{set(`#scenario-form textarea[name="yaml"]`, "name: volumes-up\nexpect: volume quota 50\nsteps:\n  - at: 0s\n    quotas: {volumes: 50}\n"),
				click(`#scenario-form button[type="submit"]`)},
			all(`document.querySelector('#scenarios tbody tr[data-state="done"]')?.textContent.includes("volumes-up")`,
				`document.querySelector('[data-quota="volumes"] [data-field="limit"]')?.textContent === "50"`,
				`[...document.querySelectorAll('#events li')].some(li => li.dataset.type === "ScenarioStep")`)},
		{"a detach held by a stick fault rule shows as detaching on the bar and in the numbers (GET /v1/instances counts it)",
			[]chromedp.Action[chromedp.Void]{chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
				if _, err := admin.CreateFault(ctx, cloud.FaultRule{Operation: cloud.OperationDetachVolume, InstanceID: node, Transition: cloud.TransitionStick}); err != nil {
					return err
				}
				_, err := driver.DetachVolume(ctx, vols[0], node)
				return err
			})},
			all(segIs("detaching", 1), segIs("attached", 1),
				`document.querySelector('[data-instance="`+node+`"] [data-field="detaching"] b')?.textContent === "1"`)},
		{"the held detach released (its rule deleted through the page): attached 1, detaching 0",
			[]chromedp.Action[chromedp.Void]{click(`#faults tbody tr:last-child button`)},
			all(segIs("detaching", 0), segIs("attached", 1), `document.querySelectorAll('#faults tbody tr').length === 1`)},
	}
	for _, s := range steps {
		if err := chromedp.Do(bctx, s.actions...); err != nil {
			t.Fatalf("%s: %v", s.what, err)
		}
		if _, err := chromedp.Run(bctx, chromedp.Poll[bool](s.until, chromedp.WithPollingTimeout(waitFor), chromedp.WithPollingInterval(100*time.Millisecond))); err != nil {
			status, _ := chromedp.Run(bctx, chromedp.Evaluate[string](`document.querySelector("#status").textContent`))
			html, _ := chromedp.Run(bctx, chromedp.Evaluate[string](`document.querySelector("main").innerText`))
			saveScreenshot(t, bctx, "failed.png", false)
			t.Fatalf("%s: the page did not show it within %v (%v); status %q\n%s", s.what, waitFor, err, status, html)
		}
		t.Logf("ok: %s", s.what)
	}

	// The page changed the cloud through the API, not just its own view.
	q, err := admin.GetQuotas(ctx)
	if err != nil || q.Attachments.Limit != 40 || q.Volumes.Limit != 50 {
		t.Fatalf("quotas after the page's changes: %+v, %v", q, err)
	}
	inst, err := admin.GetInstance(ctx, node)
	if err != nil || inst.OutOfBandSlots != 4 {
		t.Fatalf("%s after the page's change: %+v, %v", node, inst, err)
	}
	rules, err := admin.ListFaults(ctx)
	if err != nil || len(rules) != 1 || rules[0].InstanceID != "node-b1" {
		t.Fatalf("fault rules after the page's changes: %+v, %v", rules, err)
	}
	// Let the plot run on a little, and the last notice fade, for the screenshot.
	if err := chromedp.Do(bctx, chromedp.Sleep(3500*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	saveScreenshot(t, bctx, "console.png", *updateScreenshot)

	jsMu.Lock()
	defer jsMu.Unlock()
	if len(jsErrors) > 0 {
		t.Fatalf("the page raised JavaScript errors:\n%s", strings.Join(jsErrors, "\n"))
	}
}

// saveScreenshot writes a full-page PNG into the test's artefact directory (kept with
// go test -artifacts -outputdir=DIR) and, with toDocs, to docs/console.png.
func saveScreenshot(t *testing.T, ctx context.Context, name string, toDocs bool) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Errorf("screenshot: %v", err)
		return
	}
	path := filepath.Join(t.ArtifactDir(), name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Errorf("screenshot: %v", err)
		return
	}
	t.Logf("screenshot: %s (%d bytes)", path, len(png))
	if toDocs {
		if err := os.WriteFile("../../docs/console.png", png, 0o644); err != nil {
			t.Errorf("screenshot: %v", err)
		}
	}
}
