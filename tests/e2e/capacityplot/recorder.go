package capacityplot

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud/admin"
)

// Options configure a Recorder.
type Options struct {
	// Driver is the CSI driver name, e.g. disk.fakecloud.dev.
	Driver string
	// Interval is the time between samples; ≥ 100ms.
	Interval time.Duration
	// Share is the driver's --quota-share; empty means none.
	Share QuotaShare
	// PluginURLs map node name to node plugin HTTP base URL (optional).
	PluginURLs map[string]string
	// Title heads the plot.
	Title string
}

// Validate reports every problem of o at once.
func (o Options) Validate() error {
	var errs []error
	if o.Driver == "" {
		errs = append(errs, errors.New("driver name is required"))
	}
	if o.Interval < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("interval must be ≥ 100ms, got %s", o.Interval))
	}
	if o.Share != "" && o.Share != QuotaShareNone && o.Share != QuotaShareEven {
		errs = append(errs, fmt.Errorf("quota share must be none or even, got %q", o.Share))
	}
	return errors.Join(errs...)
}

// Recording is everything one observation produced. WriteFiles saves it as JSON
// (RecordingFile) beside the plot, so that the plot can be drawn again from it
// (ReadRecording) without the cluster; Lags are derived and not saved.
type Recording struct {
	Title  string    `json:"title"`
	Driver string    `json:"driver"`
	Start  time.Time `json:"start"`
	End    time.Time `json:"end"`
	// Interval is the time between samples (nanoseconds in JSON).
	Interval time.Duration `json:"intervalNs"`
	// Nodes are the observed nodes, sorted; NodeIDs maps them to instances.
	Nodes   []string          `json:"nodes"`
	NodeIDs map[string]string `json:"nodeIds"`
	// Truth is the replayed cloud truth per node (empty when no baseline).
	Truth map[string][]TruthStep `json:"truth,omitempty"`
	// Initial is the CSINode count per node at the start.
	Initial map[string]*int64 `json:"initial"`
	// Writes counts CSINode updates per node; Changes are the count changes, in the
	// order the watch saw them.
	Writes  map[string]int `json:"writes"`
	Changes []CountChange  `json:"changes"`
	// Lags are ComputeLags of Truth and Changes per node.
	Lags    map[string][]Lag `json:"-"`
	Samples []Sample         `json:"samples"`
	// Notes are problems worth reading next to the numbers.
	Notes []string `json:"notes,omitempty"`
}

// Stats computes NodeStats for every node, in node order.
func (r *Recording) Stats() []NodeStats {
	out := make([]NodeStats, 0, len(r.Nodes))
	for _, n := range r.Nodes {
		out = append(out, Stats(n, r.Truth[n], r.Lags[n], r.Writes[n]))
	}
	return out
}

// Recorder watches CSINode, samples nodes and the cloud, and at Stop
// replays the cloud's events into a Recording.
type Recorder struct {
	opts  Options
	cs    kubernetes.Interface
	cloud *admin.Client

	watcher  *Watcher
	sampler  *Sampler
	baseline Baseline
	start    time.Time
	notes    []string
	cancel   context.CancelFunc
	wg       sync.WaitGroup

	mu      sync.Mutex
	samples []Sample
}

// NewRecorder returns a recorder; it starts nothing. Errors: invalid opts,
// nil clients.
func NewRecorder(cs kubernetes.Interface, cc *admin.Client, opts Options) (*Recorder, error) {
	var errs []error
	if err := opts.Validate(); err != nil {
		errs = append(errs, err)
	}
	if cs == nil || cc == nil {
		errs = append(errs, errors.New("a Kubernetes client and a cloud client are required"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("capacity recorder: %w", err)
	}
	if opts.Share == "" {
		opts.Share = QuotaShareNone
	}
	return &Recorder{opts: opts, cs: cs, cloud: cc}, nil
}

// Start starts the informers (CSINode, VolumeAttachment, Pod, PVC, PV),
// waits for their caches, captures the cloud baseline of every node whose
// CSINode lists the driver, and samples every Interval until Stop. The
// goroutines end with ctx or Stop.
func (r *Recorder) Start(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	r.cancel = cancel
	f := informers.NewSharedInformerFactory(r.cs, 0)
	r.watcher = NewWatcher(r.opts.Driver, nil)
	csiInf := f.Storage().V1().CSINodes()
	reg, err := csiInf.Informer().AddEventHandler(r.watcher.Handler())
	if err != nil {
		cancel()
		return fmt.Errorf("capacity recorder: CSINode handler: %w", err)
	}
	r.sampler = &Sampler{Driver: r.opts.Driver, Cloud: r.cloud, Share: r.opts.Share, PluginURLs: r.opts.PluginURLs, Listers: Listers{
		CSINodes: csiInf.Lister(), VolumeAttachments: f.Storage().V1().VolumeAttachments().Lister(),
		Pods: f.Core().V1().Pods().Lister(), PVCs: f.Core().V1().PersistentVolumeClaims().Lister(), PVs: f.Core().V1().PersistentVolumes().Lister(),
	}}
	f.Start(ctx.Done())
	r.wg.Add(1)
	go func() { defer r.wg.Done(); <-ctx.Done(); f.Shutdown() }()
	syncCtx, syncCancel := context.WithTimeout(ctx, time.Minute)
	defer syncCancel()
	for typ, ok := range f.WaitForCacheSync(syncCtx.Done()) {
		if !ok {
			r.Stop(context.Background())
			return fmt.Errorf("capacity recorder: %v cache did not sync within a minute", typ)
		}
	}
	// The handler, not only the cache, must have seen the initial list: the
	// nodes to sample and replay come from it.
	if !cache.WaitForCacheSync(syncCtx.Done(), reg.HasSynced) {
		r.Stop(context.Background())
		return errors.New("capacity recorder: CSINode handler did not sync")
	}
	r.start = time.Now()
	nodes, ids := r.nodes()
	if len(nodes) == 0 {
		r.notes = append(r.notes, "no CSINode lists "+r.opts.Driver+" at the start: nothing to replay")
	} else {
		b, err := CaptureBaseline(ctx, r.cloud, ids)
		if err != nil {
			r.notes = append(r.notes, "no cloud baseline, truth comes from samples only: "+err.Error())
		}
		r.baseline = b
	}
	r.wg.Add(1)
	go r.loop(ctx)
	return nil
}

// nodes are the nodes whose CSINode lists the driver, sorted, and their
// instance IDs in the same order.
func (r *Recorder) nodes() ([]string, []string) {
	res := r.watcher.Result()
	nodes := make([]string, 0, len(res.NodeIDs))
	for n := range res.NodeIDs {
		nodes = append(nodes, n)
	}
	slices.Sort(nodes)
	ids := make([]string, len(nodes))
	for i, n := range nodes {
		ids[i] = res.NodeIDs[n]
	}
	return nodes, ids
}

func (r *Recorder) loop(ctx context.Context) {
	defer r.wg.Done()
	t := time.NewTicker(r.opts.Interval)
	defer t.Stop()
	for {
		r.sampleAll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (r *Recorder) sampleAll(ctx context.Context) {
	nodes, ids := r.nodes()
	at := time.Now()
	batch := make([]Sample, 0, len(nodes))
	for i, n := range nodes {
		if ctx.Err() != nil {
			return
		}
		batch = append(batch, r.sampler.SampleNode(ctx, at, n, ids[i]))
	}
	r.mu.Lock()
	r.samples = append(r.samples, batch...)
	r.mu.Unlock()
}

// Stop ends sampling and watching, reads the cloud's events since the
// baseline and returns the Recording. It may be called once; a failed event
// read is a note, not an error, so that a run still gets its plot.
func (r *Recorder) Stop(ctx context.Context) *Recording {
	if r.cancel != nil {
		r.cancel()
	}
	r.wg.Wait()
	end := time.Now()
	res := r.watcher.Result()
	nodes, _ := r.nodes()
	rec := &Recording{Title: r.opts.Title, Driver: r.opts.Driver, Start: r.start, End: end, Interval: r.opts.Interval,
		Nodes: nodes, NodeIDs: res.NodeIDs, Initial: res.Initial, Writes: res.Writes, Changes: res.Changes,
		Notes: append([]string(nil), r.notes...)}
	r.mu.Lock()
	rec.Samples = append([]Sample(nil), r.samples...)
	r.mu.Unlock()
	if len(r.baseline.Instances) > 0 {
		events, err := r.cloud.ListEvents(ctx, r.baseline.Revision)
		if err != nil {
			rec.Notes = append(rec.Notes, "cloud events unreadable, no truth replay: "+err.Error())
		} else {
			byID, notes := Replay(r.baseline, events, r.opts.Share)
			rec.Notes = append(rec.Notes, notes...)
			rec.Truth = map[string][]TruthStep{}
			for n, id := range res.NodeIDs {
				rec.Truth[n] = byID[id]
			}
			rec.Notes = append(rec.Notes, checkReplay(rec)...)
		}
	}
	rec.computeLags()
	return rec
}

// computeLags sets Lags from Truth and Changes.
func (r *Recording) computeLags() {
	perNode := map[string][]CountChange{}
	for _, c := range r.Changes {
		perNode[c.Node] = append(perNode[c.Node], c)
	}
	r.Lags = make(map[string][]Lag, len(r.Nodes))
	for _, n := range r.Nodes {
		r.Lags[n] = ComputeLags(r.Truth[n], perNode[n])
	}
}

// checkReplay compares the replayed truth with every sampled cloud reading at
// the same revision; a difference means the replay misread the log.
func checkReplay(rec *Recording) []string {
	var notes []string
	bad := 0
	for _, s := range rec.Samples {
		steps := rec.Truth[s.Node]
		if s.Cloud == nil || len(steps) == 0 || s.Cloud.Revision < steps[0].Revision {
			continue
		}
		var cur *TruthStep
		for i := range steps {
			if steps[i].Revision > s.Cloud.Revision {
				break
			}
			cur = &steps[i]
		}
		if cur != nil && cur.Truth != s.Truth {
			bad++
			if bad <= 5 {
				notes = append(notes, fmt.Sprintf("replay differs from the cloud: %s at revision %d: replayed %d, read %d", s.Node, s.Cloud.Revision, cur.Truth, s.Truth))
			}
		}
	}
	if bad > 5 {
		notes = append(notes, fmt.Sprintf("... %d replay differences in all", bad))
	}
	return notes
}

// File names WriteFiles writes.
const (
	PlotFile      = "capacity-plot.html"
	SummaryFile   = "csinode-writes.txt"
	RecordingFile = "capacity-recording.json"
)

// WriteFiles writes PlotFile, SummaryFile and RecordingFile into dir (created
// if missing) and returns the paths of the first two.
func WriteFiles(dir string, rec *Recording) (plot, summary string, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", fmt.Errorf("capacity plot dir: %w", err)
	}
	plot, summary = filepath.Join(dir, PlotFile), filepath.Join(dir, SummaryFile)
	for path, write := range map[string]func(*os.File) error{
		plot:                              func(f *os.File) error { return WriteHTML(f, rec) },
		summary:                           func(f *os.File) error { return WriteSummary(f, rec) },
		filepath.Join(dir, RecordingFile): func(f *os.File) error { return WriteRecording(f, rec) },
	} {
		f, err := os.Create(path)
		if err != nil {
			return "", "", fmt.Errorf("capacity plot: %w", err)
		}
		werr := write(f)
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return "", "", fmt.Errorf("write %s: %w", path, werr)
		}
	}
	return plot, summary, nil
}
