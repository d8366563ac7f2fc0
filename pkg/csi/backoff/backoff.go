// Package backoff remembers ControllerPublishVolume failures so that a node known to be out
// of attach slots is answered RESOURCE_EXHAUSTED at once instead of asking the cloud again,
// and a volume whose attach failed transiently (throttling, 5xx, timeouts) is not retried
// against the cloud faster than an exponential backoff allows.
//
// Windows are per error class, decided by Classify from the cloud error's class
// (cloud.ClassOf; docs/errors.md), never from the gRPC code it was answered with: a capacity
// failure opens a window for the whole node (any volume), a retryable failure one for that
// node and volume only. Final errors (invalid request, not found, zone mismatch, permission,
// ...) open none: retrying them changes nothing and remembering them would hide a fix. A successful attach or detach
// on the node, or the window expiring, lets the next publish reach the cloud. A volume this
// process saw published to a node always reaches the cloud, whose attach is idempotent.
package backoff

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/utils/clock"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// Class is the backoff class of a publish error.
type Class string

// The classes Classify returns.
const (
	// ClassNone: success, or a final error that opens no window.
	ClassNone Class = ""
	// ClassCapacity: the node or the account has no attach slot (cloud.ClassAttachCapacity:
	// AttachmentLimitExceeded / AttachmentQuotaExceeded; also cloud.ClassStorageQuota, all
	// answered RESOURCE_EXHAUSTED). Opens a node-wide window.
	ClassCapacity Class = "capacity"
	// ClassRetryable: throttling, unavailability, an unhealthy instance, internal errors,
	// timeouts, a cloud not reached (answered UNAVAILABLE, INTERNAL or DEADLINE_EXCEEDED).
	// Opens a window for the node and volume. ABORTED (the same publish in flight, or the
	// cloud's opposite transition) is not one: the in-flight guard answers the first, and
	// the second ends by itself.
	ClassRetryable Class = "retryable"
)

// Classify is the retry policy of ControllerPublishVolume: the class of the error of the
// cloud's attach (a *cloud.Error, a transport or context error, wrapped or not), the Backoff
// column of the row of its cloud class (cloud.ClassOf, cloud.Class.Handling; docs/errors.md),
// never the gRPC code it became. Final errors (the request or the state of the objects must
// change first) are ClassNone, and so are the cloud's opposite transition (it ends by
// itself, and the retry must reach the cloud as soon as it has) and a canceled call (the
// caller gave up; the cloud said nothing).
func Classify(err error) Class { return Class(cloud.ClassOf(err).Handling().Backoff) }

// Config sets the windows. A window after n consecutive failures of a class lasts
// min(Max, Initial·2^(n−1)), shortened by a random share of up to Jitter of itself so that
// retries of many volumes spread out.
type Config struct {
	// CapacityInitial is the first node-wide window after RESOURCE_EXHAUSTED (default 5s).
	CapacityInitial time.Duration
	// CapacityMax caps the node-wide window (default 1m); it stays below the kubelet's
	// ~2 min attach wait so that a freed slot is seen before the kubelet rejects the pod.
	CapacityMax time.Duration
	// RetryableInitial is the first per-volume window after a retryable error (default 1s).
	RetryableInitial time.Duration
	// RetryableMax caps the per-volume window (default 30s).
	RetryableMax time.Duration
	// Jitter is the random share in [0, 1) taken off each window (default 0.2).
	Jitter float64
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{
		CapacityInitial: 5 * time.Second, CapacityMax: time.Minute,
		RetryableInitial: time.Second, RetryableMax: 30 * time.Second,
		Jitter: 0.2,
	}
}

// Validate reports every problem of c at once (errors.Join).
func (c Config) Validate() error {
	var errs []error
	if c.CapacityInitial <= 0 || c.CapacityMax < c.CapacityInitial {
		errs = append(errs, fmt.Errorf("capacity backoff must have 0 < initial (%s) <= max (%s)", c.CapacityInitial, c.CapacityMax))
	}
	if c.RetryableInitial <= 0 || c.RetryableMax < c.RetryableInitial {
		errs = append(errs, fmt.Errorf("retryable backoff must have 0 < initial (%s) <= max (%s)", c.RetryableInitial, c.RetryableMax))
	}
	if !(c.Jitter >= 0 && c.Jitter < 1) {
		errs = append(errs, fmt.Errorf("backoff jitter must be in [0, 1), got %v", c.Jitter))
	}
	return errors.Join(errs...)
}

type volumeKey struct{ node, volume string }

type window struct {
	until    time.Time
	failures int
	at       time.Time // when the failure that opened (or last lengthened) the window happened
	err      error     // the remembered status error of that failure
}

// Backoff holds the open windows. Safe for concurrent use.
type Backoff struct {
	cfg Config
	clk clock.PassiveClock

	mu      sync.Mutex
	rng     *rand.Rand
	nodes   map[string]*window
	volumes map[volumeKey]*window
	// published are the pairs this process saw published and not yet detached: a repeated
	// publish of one of them must reach the cloud (which answers OK) even while the node
	// is full, or an attached volume would get RESOURCE_EXHAUSTED and its pod be rejected.
	published map[volumeKey]struct{}
	records   int
}

// New returns an empty Backoff; clk nil means the real clock. It returns cfg's validation
// error, if any.
func New(cfg Config, clk clock.PassiveClock) (*Backoff, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("new publish backoff: %w", err)
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Backoff{
		cfg: cfg, clk: clk,
		// The jitter only spreads retries; a fixed seed keeps tests reproducible.
		rng:       rand.New(rand.NewPCG(1, 2)),
		nodes:     map[string]*window{},
		volumes:   map[volumeKey]*window{},
		published: map[volumeKey]struct{}{},
	}, nil
}

// Check returns ClassNone and nil when a publish of volumeID to nodeID may go to the cloud,
// else the window's class and the remembered answer as a status error: ClassCapacity and
// RESOURCE_EXHAUSTED while the node is in a capacity window, ClassRetryable and the
// remembered code (e.g. UNAVAILABLE) while the volume is in a retryable window.
// The message names volumeID and nodeID, how long ago the failure that opened the window
// happened and what it said, and how long the window still lasts. A node-wide window is
// usually opened by another volume's attach, whose message must not read as this volume's
// (it ends up in that VolumeAttachment's status.attachError). Call it after request
// validation and before the cloud.
func (b *Backoff) Check(nodeID, volumeID string) (Class, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clk.Now()
	if _, ok := b.published[volumeKey{nodeID, volumeID}]; ok {
		return ClassNone, nil
	}
	if w := b.nodes[nodeID]; w != nil && now.Before(w.until) {
		code, cause := remembered(w, codes.ResourceExhausted)
		return ClassCapacity, status.Errorf(code, "attach %s to %s not tried: the cloud refused an attach there for lack of capacity %s ago (%s); not asking the cloud again for %s",
			volumeID, nodeID, roundMs(now.Sub(w.at)), cause, roundMs(w.until.Sub(now)))
	}
	if w := b.volumes[volumeKey{nodeID, volumeID}]; w != nil && now.Before(w.until) {
		code, cause := remembered(w, codes.Unavailable)
		return ClassRetryable, status.Errorf(code, "attach %s to %s not retried yet: it failed %s ago (%s); backing off for %s",
			volumeID, nodeID, roundMs(now.Sub(w.at)), cause, roundMs(w.until.Sub(now)))
	}
	return ClassNone, nil
}

// remembered returns the code to answer with (the remembered status code, else fallback) and
// the remembered failure's message.
func remembered(w *window, fallback codes.Code) (codes.Code, string) {
	if s, ok := status.FromError(w.err); ok && s.Code() != codes.Unknown {
		return s.Code(), s.Message()
	}
	if w.err != nil {
		return fallback, w.err.Error()
	}
	return fallback, "no error remembered"
}

// roundMs rounds d to milliseconds for a message; a clock that went back shows 0s.
func roundMs(d time.Duration) time.Duration { return max(d, 0).Round(time.Millisecond) }

// Record notes the outcome of a publish of volumeID to nodeID that reached the cloud. cause
// is the error of the cloud's attach (nil: attached), whose Classify class decides; answer is
// what the RPC returned for it (a status error), which Check answers with and quotes while
// the window lasts (nil: cause is quoted). A nil cause (success) closes the volume's window
// and, unless the pair was already published (a repeated publish uses no new slot), the
// node's capacity window: the node had a slot. A capacity error opens or lengthens the
// node's window, a retryable one the volume's; a final error opens none. Any error that is
// not retryable forgets that the pair is published.
func (b *Backoff) Record(nodeID, volumeID string, cause, answer error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clk.Now()
	key := volumeKey{nodeID, volumeID}
	if answer == nil {
		answer = cause
	}
	class := Classify(cause)
	switch class {
	case ClassCapacity:
		b.nodes[nodeID] = b.next(b.nodes[nodeID], now, answer, b.cfg.CapacityInitial, b.cfg.CapacityMax)
	case ClassRetryable:
		b.volumes[key] = b.next(b.volumes[key], now, answer, b.cfg.RetryableInitial, b.cfg.RetryableMax)
	default:
		if cause == nil {
			if _, again := b.published[key]; !again {
				// A new attachment proves the node had a slot. A repeated publish of an
				// attached pair proves nothing: the node may still be full.
				delete(b.nodes, nodeID)
			}
			delete(b.volumes, key)
			b.published[key] = struct{}{}
		}
	}
	if cause != nil && class != ClassRetryable {
		// An attached pair's attach is an idempotent success, so a capacity or final error
		// says the pair is not (or no longer) attached; only transient errors say nothing.
		delete(b.published, key)
	}
	b.records++
	if b.records%256 == 0 {
		b.sweep(now)
	}
}

// next is the window after one more failure. Failures in a row grow it; a failure long
// after the last window ended (more than the cap) starts again from the initial window.
func (b *Backoff) next(w *window, now time.Time, err error, initial, maxWindow time.Duration) *window {
	n := 1
	if w != nil && now.Sub(w.until) <= maxWindow {
		n = w.failures + 1
	}
	d := initial
	for i := 1; i < n && d < maxWindow; i++ {
		d *= 2
	}
	d = min(d, maxWindow)
	d -= time.Duration(b.cfg.Jitter * b.rng.Float64() * float64(d))
	return &window{until: now.Add(d), failures: n, at: now, err: err}
}

// Published records that the cloud reports volumeID attached to nodeID, learnt some other
// way than a publish through this Backoff (a GetVolume after a restart of the controller,
// whose in-memory set starts empty): later Checks of the pair pass, and its repeated
// publish does not close the node's capacity window.
func (b *Backoff) Published(nodeID, volumeID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.published[volumeKey{nodeID, volumeID}] = struct{}{}
}

// Detached records a successful ControllerUnpublishVolume of volumeID from nodeID: a slot is
// free, so the node's capacity window closes; the volume's own window and published mark go.
func (b *Backoff) Detached(nodeID, volumeID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	key := volumeKey{nodeID, volumeID}
	delete(b.nodes, nodeID)
	delete(b.volumes, key)
	delete(b.published, key)
}

// Reset closes nodeID's capacity window (a slot was freed some other way, say the node's
// limit was raised). Volume windows stay: they are about the cloud's health, not the node's
// slots.
func (b *Backoff) Reset(nodeID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.nodes, nodeID)
}

// Forget drops everything known about volumeID on nodeID (the volume was deleted, say).
func (b *Backoff) Forget(nodeID, volumeID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	key := volumeKey{nodeID, volumeID}
	delete(b.volumes, key)
	delete(b.published, key)
}

// sweep drops windows that ended long enough ago that they no longer grow the next one.
func (b *Backoff) sweep(now time.Time) {
	for k, w := range b.nodes {
		if now.Sub(w.until) > b.cfg.CapacityMax {
			delete(b.nodes, k)
		}
	}
	for k, w := range b.volumes {
		if now.Sub(w.until) > b.cfg.RetryableMax {
			delete(b.volumes, k)
		}
	}
}

// Open returns the number of windows in force now: nodes refused for capacity and
// node/volume pairs refused after a retryable error. Expired windows kept only to grow the
// next one are not counted (Len counts them).
func (b *Backoff) Open() (nodes, volumes int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clk.Now()
	for _, w := range b.nodes {
		if now.Before(w.until) {
			nodes++
		}
	}
	for _, w := range b.volumes {
		if now.Before(w.until) {
			volumes++
		}
	}
	return nodes, volumes
}

// Len returns the number of open or remembered windows (node-wide, per volume), for tests
// and debugging.
func (b *Backoff) Len() (nodes, volumes int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.nodes), len(b.volumes)
}
