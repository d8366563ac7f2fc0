package capacity

import (
	"math"
	"testing"
	"time"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// reading builds a capacity reading; the defaults leave quota out of the way.
func reading(limit, oob, attached int, headroom int64, rev uint64) *cloud.Capacity {
	return &cloud.Capacity{InstanceID: "i-1", AttachLimit: limit, OutOfBandSlots: oob, Attached: attached,
		QuotaHeadroom: headroom, Instances: 1, Revision: rev}
}

// inEpoch sets a reading's cloud epoch.
func inEpoch(c *cloud.Capacity, epoch string) *cloud.Capacity {
	c.Epoch = epoch
	return c
}

func here(n int64) *int64 { return &n }

// unhealthy sets a reading's instance health.
func unhealthy(c *cloud.Capacity, h cloud.InstanceHealth) *cloud.Capacity {
	c.Health = h
	return c
}

// tick is one instant of a scripted timeline: optionally the node's live count, then
// optionally a reading or a failed lookup, then the expected answer of Value.
type tick struct {
	at       time.Duration
	here     *int64
	read     *cloud.Capacity
	err      ErrorClass
	want     int64
	wantMode Mode
}

func TestPolicyTimelines(t *testing.T) {
	defaults := DefaultConfig()
	tests := []struct {
		name    string
		cfg     func(*Config)
		restore *PersistedState
		ticks   []tick
	}{
		{
			name: "no knowledge reports 1 until the first reading, which is taken as is",
			ticks: []tick{
				{at: 0, want: 1, wantMode: ModeFloor},
				{at: time.Second, read: reading(16, 1, 3, 100, 1), want: 15, wantMode: ModeFresh},
			},
		},
		{
			name: "an impaired instance drops to the floor at once and gets its value back when health returns",
			ticks: []tick{
				{at: 0, read: reading(16, 1, 3, 100, 1), want: 15, wantMode: ModeFresh},
				{at: 5 * time.Second, here: here(4), read: unhealthy(reading(16, 1, 4, 100, 2), cloud.InstanceHealthImpaired), want: 4, wantMode: ModeFloor},
				// Lookups failing while impaired keep the floor: the health is not known to be back.
				{at: 10 * time.Second, err: ClassServer, want: 4, wantMode: ModeFloor},
				{at: 15 * time.Second, read: unhealthy(reading(16, 1, 4, 100, 3), cloud.InstanceHealthStopped), want: 4, wantMode: ModeFloor},
				// Back: the value before the impairment, without the stability window.
				{at: 20 * time.Second, read: reading(16, 1, 4, 100, 4), want: 15, wantMode: ModeFresh},
			},
		},
		{
			name: "health returning restores no more than the fresh target; a higher target ramps",
			ticks: []tick{
				{at: 0, read: reading(16, 1, 0, 100, 1), want: 15, wantMode: ModeFresh},
				{at: 5 * time.Second, here: here(2), read: unhealthy(reading(16, 1, 2, 100, 2), cloud.InstanceHealthImpaired), want: 2, wantMode: ModeFloor},
				{at: 10 * time.Second, read: reading(10, 1, 2, 100, 3), want: 9, wantMode: ModeFresh},
				{at: 15 * time.Second, read: unhealthy(reading(10, 1, 2, 100, 4), cloud.InstanceHealthImpaired), want: 2, wantMode: ModeFloor},
				{at: 20 * time.Second, read: reading(32, 1, 2, 100, 5), want: 9, wantMode: ModeRamping},
			},
		},
		{
			name: "a first reading of an impaired instance reports the floor, then the truth",
			ticks: []tick{
				{at: 0, here: here(0), read: unhealthy(reading(16, 1, 0, 100, 1), cloud.InstanceHealthImpaired), want: 1, wantMode: ModeFloor},
				{at: 5 * time.Second, read: reading(16, 1, 0, 100, 2), want: 15, wantMode: ModeFresh},
			},
		},
		{
			name: "never 0 and never negative",
			ticks: []tick{
				{at: 0, read: reading(8, 8, 0, 100, 1), want: 1, wantMode: ModeFresh},
				{at: 5 * time.Second, read: reading(8, 12, 0, 100, 2), want: 1, wantMode: ModeFresh},
				{at: 10 * time.Second, read: reading(8, 0, 0, 0, 3), want: 1, wantMode: ModeFresh},
				{at: 15 * time.Second, read: reading(0, 0, 0, 0, 4), want: 1, wantMode: ModeFresh},
			},
		},
		{
			name: "quota headroom bounds the value: attached plus headroom",
			ticks: []tick{
				{at: 0, read: reading(16, 1, 4, 3, 1), want: 7, wantMode: ModeFresh},
				{at: 5 * time.Second, read: reading(16, 1, 4, 0, 2), want: 4, wantMode: ModeFresh},
			},
		},
		{
			name: "even share splits headroom rounding up",
			cfg:  func(c *Config) { c.QuotaShare = QuotaShareEven },
			ticks: []tick{
				{at: 0, read: &cloud.Capacity{AttachLimit: 16, OutOfBandSlots: 1, Attached: 2, QuotaHeadroom: 10, Instances: 4, Revision: 1}, want: 5, wantMode: ModeFresh},
				{at: 5 * time.Second, read: &cloud.Capacity{AttachLimit: 16, OutOfBandSlots: 1, Attached: 2, QuotaHeadroom: 0, Instances: 4, Revision: 2}, want: 2, wantMode: ModeFresh},
			},
		},
		{
			name: "decreases apply at once",
			ticks: []tick{
				{at: 0, read: reading(16, 1, 3, 100, 1), want: 15, wantMode: ModeFresh},
				{at: 5 * time.Second, read: reading(8, 1, 3, 100, 2), want: 7, wantMode: ModeFresh},
				{at: 6 * time.Second, read: reading(8, 4, 3, 100, 3), want: 4, wantMode: ModeFresh},
			},
		},
		{
			name: "an increase holds for the stability window, then ramps by max-step per refresh",
			ticks: []tick{
				{at: 0, read: reading(8, 1, 3, 100, 1), want: 7, wantMode: ModeFresh},
				{at: 10 * time.Second, read: reading(16, 1, 3, 100, 2), want: 7, wantMode: ModeRamping},
				{at: 25 * time.Second, read: reading(16, 1, 3, 100, 2), want: 7, wantMode: ModeRamping},
				{at: 39 * time.Second, read: reading(16, 1, 3, 100, 2), want: 7, wantMode: ModeRamping},
				{at: 40 * time.Second, read: reading(16, 1, 3, 100, 2), want: 9, wantMode: ModeRamping},
				{at: 45 * time.Second, read: reading(16, 1, 3, 100, 2), want: 11, wantMode: ModeRamping},
				{at: 50 * time.Second, read: reading(16, 1, 3, 100, 2), want: 13, wantMode: ModeRamping},
				{at: 55 * time.Second, read: reading(16, 1, 3, 100, 2), want: 15, wantMode: ModeFresh},
			},
		},
		{
			name: "a drop during a ramp applies at once and restarts the window",
			ticks: []tick{
				{at: 0, read: reading(8, 1, 3, 100, 1), want: 7, wantMode: ModeFresh},
				{at: 5 * time.Second, read: reading(16, 1, 3, 100, 2), want: 7, wantMode: ModeRamping},
				{at: 35 * time.Second, read: reading(16, 1, 3, 100, 2), want: 9, wantMode: ModeRamping},
				{at: 40 * time.Second, read: reading(6, 1, 3, 100, 3), want: 5, wantMode: ModeFresh},
				// The drop came 5s after an increase: a flap, so the window is now 60s.
				{at: 45 * time.Second, read: reading(16, 1, 3, 100, 4), want: 5, wantMode: ModeRamping},
				{at: 104 * time.Second, read: reading(16, 1, 3, 100, 4), want: 5, wantMode: ModeRamping},
				{at: 105 * time.Second, read: reading(16, 1, 3, 100, 4), want: 7, wantMode: ModeRamping},
			},
		},
		{
			name: "flap damping: increases undone soon double the window, quiet time halves it",
			ticks: []tick{
				{at: 0, read: reading(16, 1, 4, 6, 1), want: 10, wantMode: ModeFresh},
				{at: 5 * time.Second, read: reading(16, 1, 4, 7, 2), want: 10, wantMode: ModeRamping},
				{at: 35 * time.Second, read: reading(16, 1, 4, 7, 2), want: 11, wantMode: ModeFresh},
				{at: 40 * time.Second, read: reading(16, 1, 4, 6, 3), want: 10, wantMode: ModeFresh}, // flap: 60s
				{at: 45 * time.Second, read: reading(16, 1, 4, 7, 4), want: 10, wantMode: ModeRamping},
				{at: 104 * time.Second, read: reading(16, 1, 4, 7, 4), want: 10, wantMode: ModeRamping},
				{at: 105 * time.Second, read: reading(16, 1, 4, 7, 4), want: 11, wantMode: ModeFresh},
				{at: 110 * time.Second, read: reading(16, 1, 4, 6, 5), want: 10, wantMode: ModeFresh}, // flap: 120s
				{at: 115 * time.Second, read: reading(16, 1, 4, 7, 6), want: 10, wantMode: ModeRamping},
				{at: 234 * time.Second, read: reading(16, 1, 4, 7, 6), want: 10, wantMode: ModeRamping},
				{at: 235 * time.Second, read: reading(16, 1, 4, 7, 6), want: 11, wantMode: ModeFresh},
				// 2 × 12 minutes after the last flap the window is back to 30s.
				{at: 2000 * time.Second, read: reading(16, 1, 4, 6, 7), want: 10, wantMode: ModeFresh},
				{at: 2005 * time.Second, read: reading(16, 1, 4, 7, 8), want: 10, wantMode: ModeRamping},
				{at: 2035 * time.Second, read: reading(16, 1, 4, 7, 8), want: 11, wantMode: ModeFresh},
			},
		},
		{
			name: "no flap damping when the max window is the window",
			cfg:  func(c *Config) { c.MaxStabilityWindow = c.StabilityWindow },
			ticks: []tick{
				{at: 0, read: reading(16, 1, 4, 6, 1), want: 10, wantMode: ModeFresh},
				{at: 5 * time.Second, read: reading(16, 1, 4, 7, 2), want: 10, wantMode: ModeRamping},
				{at: 35 * time.Second, read: reading(16, 1, 4, 7, 2), want: 11, wantMode: ModeFresh},
				{at: 40 * time.Second, read: reading(16, 1, 4, 6, 3), want: 10, wantMode: ModeFresh},
				{at: 45 * time.Second, read: reading(16, 1, 4, 7, 4), want: 10, wantMode: ModeRamping},
				{at: 75 * time.Second, read: reading(16, 1, 4, 7, 4), want: 11, wantMode: ModeFresh},
			},
		},
		{
			name: "±1 flapping of quota headroom is not reported",
			ticks: func() []tick {
				ts := []tick{{at: 0, read: reading(16, 1, 4, 6, 1), want: 10, wantMode: ModeFresh}}
				for i := 1; i <= 24; i++ { // two minutes of 11, 10, 11, 10 ...
					h, mode := int64(6), ModeFresh
					if i%2 == 1 {
						h, mode = 7, ModeRamping
					}
					ts = append(ts, tick{at: time.Duration(i) * 5 * time.Second, read: reading(16, 1, 4, h, uint64(i+1)), want: 10, wantMode: mode})
				}
				return ts
			}(),
		},
		{
			name: "±1 flapping down is followed at once, the way back up waits",
			ticks: []tick{
				{at: 0, read: reading(16, 1, 4, 6, 1), want: 10, wantMode: ModeFresh},
				{at: 5 * time.Second, read: reading(16, 1, 4, 5, 2), want: 9, wantMode: ModeFresh},
				{at: 10 * time.Second, read: reading(16, 1, 4, 6, 3), want: 9, wantMode: ModeRamping},
				{at: 15 * time.Second, read: reading(16, 1, 4, 5, 4), want: 9, wantMode: ModeFresh},
				{at: 20 * time.Second, read: reading(16, 1, 4, 6, 5), want: 9, wantMode: ModeRamping},
				{at: 50 * time.Second, read: reading(16, 1, 4, 6, 6), want: 10, wantMode: ModeFresh},
			},
		},
		{
			name: "outage: last known good, then floor, then recovery ramps from the floor",
			ticks: []tick{
				{at: 0, read: reading(16, 1, 3, 100, 1), want: 15, wantMode: ModeFresh},
				{at: 5 * time.Second, err: ClassServer, want: 15, wantMode: ModeLastKnownGood},
				{at: 2 * time.Minute, err: ClassTimeout, want: 15, wantMode: ModeLastKnownGood},
				{at: 5 * time.Minute, err: ClassNetwork, want: 15, wantMode: ModeLastKnownGood},
				{at: 5*time.Minute + time.Second, want: 3, wantMode: ModeFloor},
				{at: 6 * time.Minute, err: ClassThrottled, want: 3, wantMode: ModeFloor},
				{at: 7 * time.Minute, read: reading(16, 1, 3, 100, 2), want: 3, wantMode: ModeRamping},
				{at: 7*time.Minute + 30*time.Second, read: reading(16, 1, 3, 100, 2), want: 5, wantMode: ModeRamping},
				{at: 7*time.Minute + 35*time.Second, read: reading(16, 1, 3, 100, 2), want: 7, wantMode: ModeRamping},
				{at: 7*time.Minute + 40*time.Second, read: reading(16, 1, 3, 100, 2), want: 9, wantMode: ModeRamping},
				{at: 7*time.Minute + 45*time.Second, read: reading(16, 1, 3, 100, 2), want: 11, wantMode: ModeRamping},
				{at: 7*time.Minute + 50*time.Second, read: reading(16, 1, 3, 100, 2), want: 13, wantMode: ModeRamping},
				{at: 7*time.Minute + 55*time.Second, read: reading(16, 1, 3, 100, 2), want: 15, wantMode: ModeFresh},
			},
		},
		{
			name: "short outage ending with the same truth is fresh at once",
			ticks: []tick{
				{at: 0, read: reading(16, 1, 3, 100, 1), want: 15, wantMode: ModeFresh},
				{at: 5 * time.Second, err: ClassServer, want: 15, wantMode: ModeLastKnownGood},
				{at: 10 * time.Second, read: reading(16, 1, 3, 100, 1), want: 15, wantMode: ModeFresh},
			},
		},
		{
			name: "a silence longer than the window restarts a pending increase",
			ticks: []tick{
				{at: 0, read: reading(16, 1, 4, 6, 1), want: 10, wantMode: ModeFresh},
				{at: 5 * time.Second, read: reading(16, 1, 4, 8, 2), want: 10, wantMode: ModeRamping},
				{at: 30 * time.Second, err: ClassServer, want: 10, wantMode: ModeLastKnownGood},
				// 35s without a reading > the 30s window: the higher value holds again.
				{at: 40 * time.Second, read: reading(16, 1, 4, 8, 3), want: 10, wantMode: ModeRamping},
				{at: 69 * time.Second, read: reading(16, 1, 4, 8, 3), want: 10, wantMode: ModeRamping},
				{at: 70 * time.Second, read: reading(16, 1, 4, 8, 3), want: 12, wantMode: ModeFresh},
			},
		},
		{
			name: "failed lookups keep a pending increase's window running; nothing rises while unknown",
			ticks: []tick{
				{at: 0, read: reading(16, 1, 4, 6, 1), want: 10, wantMode: ModeFresh},
				{at: 5 * time.Second, read: reading(16, 1, 4, 8, 2), want: 10, wantMode: ModeRamping},
				{at: 10 * time.Second, err: ClassServer, want: 10, wantMode: ModeLastKnownGood},
				{at: 15 * time.Second, read: reading(16, 1, 4, 8, 2), want: 10, wantMode: ModeRamping},
				{at: 20 * time.Second, err: ClassThrottled, want: 10, wantMode: ModeLastKnownGood},
				{at: 25 * time.Second, err: ClassTimeout, want: 10, wantMode: ModeLastKnownGood},
				{at: 30 * time.Second, read: reading(16, 1, 4, 8, 3), want: 10, wantMode: ModeRamping},
				// The window ends with a failure: no raise without a reading.
				{at: 35 * time.Second, err: ClassNetwork, want: 10, wantMode: ModeLastKnownGood},
				{at: 40 * time.Second, read: reading(16, 1, 4, 8, 3), want: 12, wantMode: ModeFresh},
			},
		},
		{
			name: "a lower reading between failures ends a pending increase at once",
			ticks: []tick{
				{at: 0, read: reading(16, 1, 4, 6, 1), want: 10, wantMode: ModeFresh},
				{at: 5 * time.Second, read: reading(16, 1, 4, 8, 2), want: 10, wantMode: ModeRamping},
				{at: 10 * time.Second, err: ClassServer, want: 10, wantMode: ModeLastKnownGood},
				{at: 15 * time.Second, read: reading(16, 1, 4, 5, 3), want: 9, wantMode: ModeFresh},
				{at: 20 * time.Second, err: ClassServer, want: 9, wantMode: ModeLastKnownGood},
				{at: 25 * time.Second, read: reading(16, 1, 4, 8, 4), want: 9, wantMode: ModeRamping},
				{at: 50 * time.Second, read: reading(16, 1, 4, 8, 4), want: 9, wantMode: ModeRamping},
				{at: 55 * time.Second, read: reading(16, 1, 4, 8, 4), want: 11, wantMode: ModeRamping},
			},
		},
		{
			name: "a capacity error drops a pending increase",
			ticks: []tick{
				{at: 0, here: here(3), read: reading(10, 1, 3, 100, 1), want: 9, wantMode: ModeFresh},
				{at: 5 * time.Second, read: reading(16, 1, 3, 100, 2), want: 9, wantMode: ModeRamping},
				{at: 10 * time.Second, read: reading(16, 1, 3, 100, 2), want: 9, wantMode: ModeRamping},
				{at: 15 * time.Second, err: ClassCapacity, want: 3, wantMode: ModeFloor},
				{at: 20 * time.Second, read: reading(16, 1, 3, 100, 3), want: 3, wantMode: ModeRamping},
				{at: 25 * time.Second, read: reading(16, 1, 3, 100, 3), want: 3, wantMode: ModeRamping},
				// Had the increase survived (held since 5s), this reading would raise to 5.
				{at: 35 * time.Second, read: reading(16, 1, 3, 100, 3), want: 3, wantMode: ModeRamping},
				{at: 45 * time.Second, read: reading(16, 1, 3, 100, 3), want: 3, wantMode: ModeRamping},
				{at: 50 * time.Second, read: reading(16, 1, 3, 100, 3), want: 5, wantMode: ModeRamping},
			},
		},
		{
			name: "a pending increase does not survive the floor",
			cfg:  func(c *Config) { c.StaleAfter = 20 * time.Second },
			ticks: []tick{
				{at: 0, here: here(3), read: reading(10, 1, 3, 100, 1), want: 9, wantMode: ModeFresh},
				{at: 5 * time.Second, read: reading(16, 1, 3, 100, 2), want: 9, wantMode: ModeRamping},
				{at: 10 * time.Second, err: ClassServer, want: 9, wantMode: ModeLastKnownGood},
				{at: 26 * time.Second, err: ClassServer, want: 3, wantMode: ModeFloor},
				// 30s since the last reading is within the window: only the floor dropped
				// the increase, which would otherwise rise here (held since 5s).
				{at: 35 * time.Second, read: reading(16, 1, 3, 100, 3), want: 3, wantMode: ModeRamping},
				{at: 64 * time.Second, read: reading(16, 1, 3, 100, 3), want: 3, wantMode: ModeRamping},
				{at: 65 * time.Second, read: reading(16, 1, 3, 100, 3), want: 5, wantMode: ModeRamping},
			},
		},
		{
			name: "a window shorter than the lookup interval still lets readings a lookup apart hold",
			cfg:  func(c *Config) { c.StabilityWindow, c.MaxStabilityWindow = 3*time.Second, 3*time.Second },
			ticks: []tick{
				{at: 0, read: reading(8, 1, 0, 100, 1), want: 7, wantMode: ModeFresh},
				{at: 5 * time.Second, read: reading(16, 1, 0, 100, 2), want: 7, wantMode: ModeRamping},
				{at: 11 * time.Second, read: reading(16, 1, 0, 100, 2), want: 9, wantMode: ModeRamping},
			},
		},
		{
			name: "the floor never raises the value",
			ticks: []tick{
				// The limit was lowered below what is attached: raw is 1, the floor would be 5.
				{at: 0, read: reading(2, 1, 5, 100, 1), want: 1, wantMode: ModeFresh},
				{at: 10 * time.Minute, want: 1, wantMode: ModeFloor},
			},
		},
		{
			name: "a capacity error from a reachable cloud lowers to the floor at once",
			ticks: []tick{
				{at: 0, read: reading(16, 1, 3, 100, 1), want: 15, wantMode: ModeFresh},
				{at: 5 * time.Second, err: ClassCapacity, want: 3, wantMode: ModeFloor},
				{at: 10 * time.Second, read: reading(16, 1, 3, 100, 2), want: 3, wantMode: ModeRamping},
			},
		},
		{
			name: "an older revision arriving late is ignored, in either direction",
			ticks: []tick{
				{at: 0, read: reading(16, 1, 3, 100, 10), want: 15, wantMode: ModeFresh},
				{at: 5 * time.Second, read: reading(8, 1, 3, 100, 9), want: 15, wantMode: ModeFresh},
				{at: 10 * time.Second, read: reading(8, 1, 3, 100, 11), want: 7, wantMode: ModeFresh},
				{at: 15 * time.Second, read: reading(16, 1, 3, 100, 10), want: 7, wantMode: ModeFresh},
				{at: 20 * time.Second, read: reading(8, 1, 3, 100, 11), want: 7, wantMode: ModeFresh},
			},
		},
		{
			name: "an ignored old reading does not refresh the last good age",
			ticks: []tick{
				{at: 0, read: reading(16, 1, 3, 100, 10), want: 15, wantMode: ModeFresh},
				{at: 4 * time.Minute, read: reading(16, 1, 3, 100, 9), want: 15, wantMode: ModeFresh},
				{at: 5*time.Minute + time.Second, err: ClassServer, want: 3, wantMode: ModeFloor},
			},
		},
		{
			name:    "restart: the persisted value is last known good with its age, and ramps after",
			restore: &PersistedState{Version: 1, Reported: 9, Revision: 20, Attached: 4, GoodAt: t0.Add(-time.Minute)},
			ticks: []tick{
				{at: 0, want: 9, wantMode: ModeLastKnownGood},
				{at: 5 * time.Second, read: reading(16, 1, 4, 100, 19), want: 9, wantMode: ModeLastKnownGood},
				{at: 10 * time.Second, err: ClassServer, want: 9, wantMode: ModeLastKnownGood},
				{at: 4*time.Minute + time.Second, want: 4, wantMode: ModeFloor},
				{at: 5 * time.Minute, read: reading(16, 1, 4, 100, 21), want: 4, wantMode: ModeRamping},
				{at: 5*time.Minute + 30*time.Second, read: reading(16, 1, 4, 100, 21), want: 6, wantMode: ModeRamping},
			},
		},
		{
			name:    "restart: the same truth confirms the persisted value",
			restore: &PersistedState{Version: 1, Reported: 9, Revision: 20, Attached: 4, GoodAt: t0.Add(-time.Minute)},
			ticks: []tick{
				{at: 0, read: reading(10, 1, 4, 100, 20), want: 9, wantMode: ModeFresh},
			},
		},
		{
			name:    "restart with a state older than stale-after starts at the floor",
			restore: &PersistedState{Version: 1, Reported: 9, Revision: 20, Attached: 4, GoodAt: t0.Add(-time.Hour)},
			ticks: []tick{
				{at: 0, want: 4, wantMode: ModeFloor},
				{at: time.Second, read: reading(16, 1, 4, 100, 21), want: 4, wantMode: ModeRamping},
			},
		},
		{
			name: "outage: the floor follows the node's live count down, never up",
			ticks: []tick{
				{at: 0, here: here(6), read: reading(16, 1, 6, 100, 1), want: 15, wantMode: ModeFresh},
				{at: 5 * time.Second, err: ClassServer, want: 15, wantMode: ModeLastKnownGood},
				// Pods ended during the outage: the cloud's last count (6) is out of date.
				{at: 4 * time.Minute, here: here(4), want: 15, wantMode: ModeLastKnownGood},
				{at: 5*time.Minute + time.Second, want: 4, wantMode: ModeFloor},
				{at: 6 * time.Minute, here: here(2), err: ClassTimeout, want: 2, wantMode: ModeFloor},
				{at: 7 * time.Minute, here: here(5), want: 2, wantMode: ModeFloor},
				{at: 8 * time.Minute, here: here(0), want: 1, wantMode: ModeFloor},
				{at: 9 * time.Minute, here: here(3), read: reading(16, 1, 3, 100, 2), want: 1, wantMode: ModeRamping},
			},
		},
		{
			name: "an unknown live count falls back to the last reading's count",
			ticks: []tick{
				{at: 0, here: here(2), read: reading(16, 1, 6, 100, 1), want: 15, wantMode: ModeFresh},
				{at: 5 * time.Second, here: here(-1), err: ClassServer, want: 15, wantMode: ModeLastKnownGood},
				{at: 5*time.Minute + 5*time.Second, want: 6, wantMode: ModeFloor},
			},
		},
		{
			name: "a capacity error floors at the live count",
			ticks: []tick{
				{at: 0, here: here(3), read: reading(16, 1, 5, 100, 1), want: 15, wantMode: ModeFresh},
				{at: 5 * time.Second, err: ClassCapacity, want: 3, wantMode: ModeFloor},
			},
		},
		{
			name:    "a new cloud epoch resets the revision guard",
			restore: &PersistedState{Version: 1, Reported: 9, Revision: 500, Epoch: "A", Attached: 4, GoodAt: t0.Add(-time.Minute)},
			ticks: []tick{
				{at: 0, read: inEpoch(reading(16, 1, 4, 100, 400), "A"), want: 9, wantMode: ModeLastKnownGood},
				{at: 5 * time.Second, read: inEpoch(reading(6, 1, 2, 100, 3), "B"), want: 5, wantMode: ModeFresh},
				// Within epoch B the guard works again; an empty epoch counts as B.
				{at: 10 * time.Second, read: inEpoch(reading(16, 1, 2, 100, 2), "B"), want: 5, wantMode: ModeFresh},
				{at: 15 * time.Second, read: reading(16, 1, 2, 100, 1), want: 5, wantMode: ModeFresh},
				{at: 20 * time.Second, read: reading(4, 1, 2, 100, 4), want: 3, wantMode: ModeFresh},
				// Increases after the reset ramp as always.
				{at: 25 * time.Second, read: inEpoch(reading(16, 1, 2, 100, 5), "B"), want: 3, wantMode: ModeRamping},
				{at: 55 * time.Second, read: inEpoch(reading(16, 1, 2, 100, 5), "B"), want: 5, wantMode: ModeRamping},
			},
		},
		{
			name:    "an empty epoch on either side is the same epoch",
			restore: &PersistedState{Version: 1, Reported: 9, Revision: 500, Attached: 4, GoodAt: t0.Add(-time.Minute)},
			ticks: []tick{
				{at: 0, read: inEpoch(reading(6, 1, 2, 100, 3), "B"), want: 9, wantMode: ModeLastKnownGood},
				{at: 5 * time.Second, read: inEpoch(reading(6, 1, 2, 100, 501), "B"), want: 5, wantMode: ModeFresh},
				{at: 10 * time.Second, read: reading(16, 1, 2, 100, 7), want: 5, wantMode: ModeFresh},
			},
		},
		{
			name: "max-step 0 jumps after the window",
			cfg:  func(c *Config) { c.MaxStep = 0 },
			ticks: []tick{
				{at: 0, read: reading(4, 1, 0, 100, 1), want: 3, wantMode: ModeFresh},
				{at: 5 * time.Second, read: reading(16, 1, 0, 100, 2), want: 3, wantMode: ModeRamping},
				{at: 35 * time.Second, read: reading(16, 1, 0, 100, 2), want: 15, wantMode: ModeFresh},
			},
		},
		{
			name: "stability window 0 ramps from the first higher reading",
			cfg:  func(c *Config) { c.StabilityWindow = 0; c.MaxStep = 5 },
			ticks: []tick{
				{at: 0, read: reading(4, 1, 0, 100, 1), want: 3, wantMode: ModeFresh},
				{at: 5 * time.Second, read: reading(16, 1, 0, 100, 2), want: 8, wantMode: ModeRamping},
				{at: 10 * time.Second, read: reading(16, 1, 0, 100, 2), want: 13, wantMode: ModeRamping},
				{at: 15 * time.Second, read: reading(16, 1, 0, 100, 2), want: 15, wantMode: ModeFresh},
			},
		},
		{
			name: "a nonsensical reading is a failure, not a decrease",
			ticks: []tick{
				{at: 0, read: reading(16, 1, 3, 100, 1), want: 15, wantMode: ModeFresh},
				{at: 5 * time.Second, read: reading(-1, 1, 3, 100, 2), want: 15, wantMode: ModeLastKnownGood},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := defaults
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			if err := cfg.Validate(); err != nil {
				t.Fatalf("config: %v", err)
			}
			p := NewPolicy(cfg)
			if tc.restore != nil {
				if err := p.Restore(*tc.restore); err != nil {
					t.Fatalf("Restore: %v", err)
				}
			}
			for i, tk := range tc.ticks {
				now := t0.Add(tk.at)
				if tk.here != nil {
					p.ObserveAttachedHere(*tk.here)
				}
				switch {
				case tk.read != nil:
					p.ObserveReading(now, *tk.read)
				case tk.err != ClassNone:
					p.ObserveError(now, tk.err)
				}
				got := p.Value(now)
				if got.Value != tk.want || got.Mode != tk.wantMode {
					t.Fatalf("tick %d at +%s: got %d (%s), want %d (%s)", i, tk.at, got.Value, got.Mode, tk.want, tk.wantMode)
				}
			}
		})
	}
}

func TestNonCapacityErrorsNeverLower(t *testing.T) {
	for _, class := range []ErrorClass{ClassPermission, ClassAuth, ClassNotFound, ClassThrottled, ClassServer,
		ClassTimeout, ClassCanceled, ClassNetwork, ClassInvalid, ClassOther} {
		t.Run(string(class), func(t *testing.T) {
			p := NewPolicy(DefaultConfig())
			p.ObserveReading(t0, *reading(16, 1, 3, 100, 1))
			if changed := p.ObserveError(t0.Add(time.Second), class); changed {
				t.Errorf("ObserveError(%s) changed the value", class)
			}
			if got := p.Value(t0.Add(time.Second)); got.Value != 15 || got.Mode != ModeLastKnownGood {
				t.Errorf("after %s: got %+v, want 15 last-known-good", class, got)
			}
		})
	}
}

func TestRaw(t *testing.T) {
	tests := []struct {
		name  string
		c     cloud.Capacity
		share QuotaShare
		want  int64
	}{
		{"slots bound", cloud.Capacity{AttachLimit: 10, OutOfBandSlots: 2, Attached: 1, QuotaHeadroom: 50, Instances: 3}, QuotaShareNone, 8},
		{"quota bound", cloud.Capacity{AttachLimit: 10, OutOfBandSlots: 2, Attached: 1, QuotaHeadroom: 3, Instances: 3}, QuotaShareNone, 4},
		{"even share rounds up", cloud.Capacity{AttachLimit: 10, Attached: 1, QuotaHeadroom: 7, Instances: 3}, QuotaShareEven, 4},
		{"even share with no instances counts one", cloud.Capacity{AttachLimit: 10, Attached: 1, QuotaHeadroom: 7}, QuotaShareEven, 8},
		{"out-of-band above the limit is negative", cloud.Capacity{AttachLimit: 4, OutOfBandSlots: 6}, QuotaShareNone, -2},
		{"negative headroom counts as 0", cloud.Capacity{AttachLimit: 10, Attached: 3, QuotaHeadroom: -5}, QuotaShareNone, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Raw(tc.c, tc.share); got != tc.want {
				t.Errorf("Raw = %d, want %d", got, tc.want)
			}
			if got := Reportable(Raw(tc.c, tc.share)); got < 1 {
				t.Errorf("Reportable = %d, want >= 1", got)
			}
		})
	}
}

func TestStateCarriesTheEpoch(t *testing.T) {
	p := NewPolicy(DefaultConfig())
	p.ObserveReading(t0, *inEpoch(reading(16, 1, 3, 100, 40), "A"))
	p.ObserveReading(t0.Add(time.Second), *inEpoch(reading(16, 1, 3, 100, 2), "B"))
	s, ok := p.State()
	if !ok || s.Epoch != "B" || s.Revision != 2 {
		t.Fatalf("State = %+v, %v; want epoch B at revision 2", s, ok)
	}
	q := NewPolicy(DefaultConfig())
	if err := q.Restore(s); err != nil {
		t.Fatal(err)
	}
	if class, _ := q.ObserveReading(t0.Add(2*time.Second), *inEpoch(reading(16, 1, 3, 100, 1), "B")); class != ClassStaleRevision {
		t.Errorf("older revision of the restored epoch: class %q, want %q", class, ClassStaleRevision)
	}
	if !q.NewEpoch(*inEpoch(reading(16, 1, 3, 100, 1), "C")) || q.NewEpoch(*reading(16, 1, 3, 100, 1)) {
		t.Error("NewEpoch: want true for C, false for an empty epoch")
	}
}

func TestRestoreRejectsUnusableState(t *testing.T) {
	for _, s := range []PersistedState{
		{Version: 0, Reported: 3, GoodAt: t0},
		{Version: 1, Reported: 0, GoodAt: t0},
		{Version: 1, Reported: 3, Attached: -1, GoodAt: t0},
		{Version: 1, Reported: 3},
	} {
		p := NewPolicy(DefaultConfig())
		if err := p.Restore(s); err == nil {
			t.Errorf("Restore(%+v) = nil, want an error", s)
		}
		if got := p.Value(t0); got.Value != 1 || got.Mode != ModeFloor {
			t.Errorf("after a rejected Restore(%+v): got %+v, want 1 floor", s, got)
		}
	}
}

// The trial that found the bug: lookups every second, about a third of them failing, and
// the target up from 11 to 15. Every failure used to restart the 30s window, which then
// needed ~30 successes in a row: the count stayed at 11 for minutes. Failures now leave the
// window running, so the count reaches 15 one window plus two ramp steps after the rise.
func TestFlakyLookupsDoNotHoldAnIncreaseBack(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MinInterval = time.Second
	for _, tc := range []struct {
		name string
		fail func(i int) bool // whether the lookup of second i fails
	}{
		{"every third lookup fails", func(i int) bool { return i%3 == 0 }},
		{"failures in pairs", func(i int) bool { return i%10 == 3 || i%10 == 4 || i%10 == 8 }},
		{"every lookup but one in three fails", func(i int) bool { return i%3 != 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewPolicy(cfg)
			p.ObserveReading(t0, *reading(16, 5, 4, 100, 1)) // 11
			reached := time.Duration(-1)
			for i := 1; i <= 120 && reached < 0; i++ {
				now := t0.Add(time.Duration(i) * time.Second)
				if tc.fail(i) {
					p.ObserveError(now, ClassServer)
				} else {
					p.ObserveReading(now, *reading(16, 1, 4, 100, 2)) // 15
				}
				got := p.Value(now)
				if got.Value < 11 || got.Value > 15 {
					t.Fatalf("at +%ds: reported %d, want within [11, 15]", i, got.Value)
				}
				if got.Value == 15 {
					reached = time.Duration(i) * time.Second
				}
			}
			// The window starts with the first successful reading of 15 (≤ 2s in), the two
			// ramp steps need two more readings (≤ 3s apart each with these patterns).
			if limit := cfg.StabilityWindow + 2*time.Second + 2*3*time.Second; reached < 0 || reached > limit {
				t.Errorf("reported 15 after %s, want within %s", reached, limit)
			}
		})
	}
}

// A capacity error is evidence against the higher value even when no Value call (which
// would see the floor) comes between it and the next reading.
func TestCapacityErrorDropsAPendingIncrease(t *testing.T) {
	p := NewPolicy(DefaultConfig())
	p.ObserveAttachedHere(3)
	p.ObserveReading(t0, *reading(10, 1, 3, 100, 1)) // 9
	p.ObserveReading(t0.Add(5*time.Second), *reading(16, 1, 3, 100, 2))
	p.ObserveReading(t0.Add(10*time.Second), *reading(16, 1, 3, 100, 2))
	p.ObserveError(t0.Add(15*time.Second), ClassCapacity)
	for _, at := range []time.Duration{20, 25, 30, 35} {
		p.ObserveReading(t0.Add(at*time.Second), *reading(16, 1, 3, 100, 3))
	}
	if got := p.Value(t0.Add(35 * time.Second)); got.Value != 3 || got.Mode != ModeRamping {
		t.Errorf("35s after the capacity error: got %+v, want 3 ramping (the hold restarts at 20s)", got)
	}
}

// An increase holds for the stability window plus the node's share of IncreaseSpread before
// its first step; a decrease is never delayed by it. A fraction outside [0, 1) is no spread.
func TestSpreadIncreasesDelaysOnlyIncreases(t *testing.T) {
	cfg := DefaultConfig()
	cfg.IncreaseSpread = time.Minute
	for _, tc := range []struct {
		name  string
		frac  float64
		delay time.Duration // after the stability window
	}{
		{"no share", 0, 0},
		{"half", 0.5, 30 * time.Second},
		{"almost all", 0.99, 59400 * time.Millisecond},
		{"negative counts as 0", -0.5, 0},
		{"one counts as 0", 1, 0},
		{"NaN counts as 0", math.NaN(), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewPolicy(cfg)
			p.SpreadIncreases(tc.frac)
			p.ObserveReading(t0, *reading(16, 5, 4, 100, 1)) // 11
			// Readings of 15 every second from +1s: the hold starts at +1s.
			raisedAt := time.Duration(-1)
			for i := 1; i <= 200 && raisedAt < 0; i++ {
				at := time.Duration(i) * time.Second
				p.ObserveReading(t0.Add(at), *reading(16, 1, 4, 100, 2))
				if p.Value(t0.Add(at)).Value > 11 {
					raisedAt = at
				}
			}
			// The first reading at or after 1s + window + delay raises it.
			want := (time.Second + cfg.StabilityWindow + tc.delay + time.Second - 1).Truncate(time.Second)
			if raisedAt != want {
				t.Errorf("first raised at +%s, want +%s", raisedAt, want)
			}
			// A decrease follows the next reading at once, whatever the spread.
			p.ObserveReading(t0.Add(300*time.Second), *reading(16, 10, 4, 100, 3)) // 6
			if got := p.Value(t0.Add(300 * time.Second)); got.Value != 6 {
				t.Errorf("after a lower reading: got %+v, want 6 at once", got)
			}
		})
	}
}

// TestSettledIn: after an increase the policy is unsettled for MaxStabilityWindow (a
// decrease then is a flap); each flap's damping level adds 3·MaxStabilityWindow from the last
// flap; nothing of this without damping. Scenario runs wait for it (fakecloud scenario).
func TestSettledIn(t *testing.T) {
	const maxW = DefaultMaxStabilityWindow
	type obs struct {
		at       time.Duration
		headroom int64 // quota headroom of the reading
	}
	// Up (a raise at 35 s), then down at 40 s: a flap, damping 1.
	flap := []obs{{0, 6}, {5 * time.Second, 7}, {35 * time.Second, 7}, {40 * time.Second, 6}}
	tests := []struct {
		name  string
		cfg   func(*Config)
		reads []obs
		at    time.Duration
		want  time.Duration
	}{
		{"a first reading: settled", nil, []obs{{0, 6}}, time.Second, 0},
		{"decreases only: settled", nil, []obs{{0, 6}, {5 * time.Second, 5}, {10 * time.Second, 4}}, 11 * time.Second, 0},
		{"ramping, not raised yet: settled as far as damping goes", nil, []obs{{0, 6}, {5 * time.Second, 7}}, 6 * time.Second, 0},
		{"an increase: unsettled for the max window after it", nil, []obs{{0, 6}, {5 * time.Second, 7}, {35 * time.Second, 7}},
			36 * time.Second, maxW - time.Second},
		{"an increase long ago: settled", nil, []obs{{0, 6}, {5 * time.Second, 7}, {35 * time.Second, 7}}, 35*time.Second + maxW, 0},
		{"a flap: one damping level decays 3 max windows after it", nil, flap, 41 * time.Second, 3*maxW - time.Second},
		{"a flap, one decay later: settled", nil, flap, 40*time.Second + 3*maxW, 0},
		{"no damping configured: always settled", func(c *Config) { c.MaxStabilityWindow = c.StabilityWindow }, flap, 41 * time.Second, 0},
		{"no window: always settled", func(c *Config) { c.StabilityWindow = 0 }, flap, 41 * time.Second, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			if tt.cfg != nil {
				tt.cfg(&cfg)
			}
			p := NewPolicy(cfg)
			for i, o := range tt.reads {
				p.ObserveReading(t0.Add(o.at), *reading(16, 1, 4, o.headroom, uint64(i+1)))
			}
			if got := p.SettledIn(t0.Add(tt.at)); got != tt.want {
				t.Fatalf("SettledIn(+%v) = %v, want %v (damping %d)", tt.at, got, tt.want, p.damping)
			}
		})
	}
}
