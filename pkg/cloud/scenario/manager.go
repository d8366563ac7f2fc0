package scenario

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// State is where a run is.
type State string

// The states of a run.
const (
	StateRunning  State = "running"
	StateDone     State = "done"     // every step ran and succeeded
	StateFailed   State = "failed"   // every step ran, some failed
	StateCanceled State = "canceled" // DELETE /v1/scenarios/{id}, or the server stopped
)

// Bounds of a Manager.
const (
	// MaxRunning is how many scenarios run at once; one more is ServerLimitExceeded.
	MaxRunning = 4
	// MaxKept is how many runs a Manager remembers, finished ones dropped oldest first.
	MaxKept = 32
	// MaxResults is how many step results a Status lists, the newest.
	MaxResults = 100
)

// StepResult is one step that ran.
type StepResult struct {
	At    Duration  `json:"at"`
	Time  time.Time `json:"time"`
	Step  string    `json:"step"`
	Error string    `json:"error,omitempty"`
}

// Status is a run as GET /v1/scenarios/{id} shows it.
type Status struct {
	ID        string     `json:"id"`
	Name      string     `json:"name"`
	Expect    string     `json:"expect,omitempty"`
	State     State      `json:"state"`
	StartedAt time.Time  `json:"startedAt"`
	EndedAt   *time.Time `json:"endedAt,omitempty"`
	// Steps is the number of steps (quota noise expanded), Done how many ran, Failed how
	// many of those failed.
	Steps  int `json:"steps"`
	Done   int `json:"done"`
	Failed int `json:"failed"`
	// Error is why a failed run failed, in one line of at most cloud.MaxMessageBytes: the
	// run's error and its first failed step's ("scenario \"x\": 1 of 3 steps failed; first:
	// +0s PATCH /v1/instances/n {...}: InstanceNotFound: ..."). Empty for a run that is not
	// failed. GET /v1/scenarios lists it, so a failed run says why without its results.
	Error string `json:"error,omitempty"`
	// Results are the newest MaxResults steps that ran, oldest first; GET /v1/scenarios
	// leaves them out (nil, omitted), GET /v1/scenarios/{id} lists them ([] before a step).
	Results []StepResult `json:"results,omitzero"`
}

// StatusList is the answer of GET /v1/scenarios, oldest first.
type StatusList struct {
	Scenarios []Status `json:"scenarios"`
}

// ManagerOptions configure a Manager; zero fields take defaults.
type ManagerOptions struct {
	// Now and Sleep are the clock of the runs (Runner's); defaults time.Now and a timer.
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
}

// Manager runs scenarios in the background for the fake cloud (POST /v1/scenarios): each in
// its own goroutine until its last step, a Cancel, or Close.
type Manager struct {
	opts   ManagerOptions
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	runs  map[string]*run
	order []string // IDs, oldest first
	next  int
}

type run struct {
	status Status
	// firstFailure is the first failed step, for Status.Error; nil while none failed.
	firstFailure *StepResult
	cancel       context.CancelFunc
	done         chan struct{} // closed when the run's goroutine ends
}

// NewManager returns a Manager with no runs; it starts nothing.
func NewManager(opts ManagerOptions) *Manager {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Manager{opts: opts, ctx: ctx, cancel: cancel, runs: map[string]*run{}}
}

// Start runs sc against api in the background and returns its first status. onStart, when
// set, is called with that status before the first step can run (so that what it records,
// the ScenarioStarted event, comes before every step's mutation); its error cancels the run
// and is returned. onStep, when set, is called after each step (from the run's goroutine).
// Errors: ServerLimitExceeded with MaxRunning runs going, Unavailable after Close, onStart's.
func (m *Manager) Start(sc *Scenario, api API, onStart func(Status) error, onStep func(id string, r StepResult)) (Status, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ctx.Err() != nil {
		return Status{}, cloud.NewError(cloud.CodeUnavailable, "the server is stopping")
	}
	running := 0
	for _, r := range m.runs {
		if r.status.State == StateRunning {
			running++
		}
	}
	if running >= MaxRunning {
		return Status{}, cloud.NewError(cloud.CodeServerLimitExceeded, "%d scenarios running already, at most %d: cancel one (DELETE /v1/scenarios/{id})", running, MaxRunning)
	}
	m.next++
	id := fmt.Sprintf("scenario-%d", m.next)
	ctx, cancel := context.WithCancel(m.ctx)
	r := &run{cancel: cancel, done: make(chan struct{}), status: Status{ID: id, Name: sc.Name, Expect: sc.Expect, State: StateRunning, StartedAt: m.opts.Now(),
		Steps: len(sc.Steps), Results: []StepResult{}}}
	m.runs[id] = r
	m.order = append(m.order, id)
	m.forget()
	runner := Runner{API: api, Now: m.opts.Now, Sleep: m.opts.Sleep, Report: func(at time.Duration, s Step, err error) {
		res := StepResult{At: Duration(at), Time: m.opts.Now(), Step: s.Describe()}
		if err != nil {
			res.Error = err.Error()
		}
		m.mu.Lock()
		st := &r.status
		st.Done++
		if err != nil {
			st.Failed++
			if r.firstFailure == nil {
				r.firstFailure = &res
			}
		}
		st.Results = append(st.Results, res)
		if len(st.Results) > MaxResults {
			st.Results = append([]StepResult{}, st.Results[len(st.Results)-MaxResults:]...)
		}
		m.mu.Unlock()
		if onStep != nil {
			onStep(id, res)
		}
	}}
	if onStart != nil {
		if err := onStart(r.status); err != nil {
			cancel()
			delete(m.runs, id)
			m.order = m.order[:len(m.order)-1]
			return Status{}, err
		}
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer close(r.done)
		defer cancel()
		err := runner.Run(ctx, sc)
		m.mu.Lock()
		defer m.mu.Unlock()
		end := m.opts.Now()
		r.status.EndedAt = &end
		switch {
		case errors.Is(err, context.Canceled):
			r.status.State = StateCanceled
		case err != nil:
			r.status.State = StateFailed
			r.status.Error = err.Error()
			if f := r.firstFailure; f != nil {
				r.status.Error += fmt.Sprintf("; first: +%v %s: %s", f.At, f.Step, f.Error)
			}
			r.status.Error = cloud.TruncateMessage(r.status.Error)
		default:
			r.status.State = StateDone
		}
	}()
	return r.copyStatus(), nil
}

// forget drops the oldest finished runs beyond MaxKept; mu is held.
func (m *Manager) forget() {
	for i := 0; len(m.order) > MaxKept && i < len(m.order); {
		id := m.order[i]
		if m.runs[id].status.State == StateRunning {
			i++
			continue
		}
		delete(m.runs, id)
		m.order = append(m.order[:i], m.order[i+1:]...)
	}
}

func (r *run) copyStatus() Status {
	st := r.status
	st.Results = append([]StepResult{}, r.status.Results...)
	return st
}

// Get returns run id's status; NotFound for an unknown (or forgotten) ID.
func (m *Manager) Get(id string) (Status, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.runs[id]
	if !ok {
		return Status{}, cloud.NewError(cloud.CodeNotFound, "no scenario %s", cloud.Quote(id))
	}
	return r.copyStatus(), nil
}

// List returns every remembered run, oldest first, without their step results.
func (m *Manager) List() StatusList {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := StatusList{Scenarios: []Status{}}
	for _, id := range m.order {
		st := m.runs[id].status
		st.Results = nil
		out.Scenarios = append(out.Scenarios, st)
	}
	return out
}

// Cancel stops run id before its next step and waits, until ctx ends, for the run to end, so
// that the status it returns says canceled (a step in flight finishes first); canceling a
// finished run changes nothing. Rules and patches of steps already run stay: a cancel undoes
// nothing. NotFound for an unknown ID.
func (m *Manager) Cancel(ctx context.Context, id string) (Status, error) {
	m.mu.Lock()
	r, ok := m.runs[id]
	m.mu.Unlock()
	if !ok {
		return Status{}, cloud.NewError(cloud.CodeNotFound, "no scenario %s", cloud.Quote(id))
	}
	r.cancel()
	return m.Wait(ctx, id)
}

// Wait blocks until run id has ended or ctx ends, and returns its status.
func (m *Manager) Wait(ctx context.Context, id string) (Status, error) {
	m.mu.Lock()
	r, ok := m.runs[id]
	m.mu.Unlock()
	if !ok {
		return Status{}, cloud.NewError(cloud.CodeNotFound, "no scenario %s", cloud.Quote(id))
	}
	select {
	case <-r.done:
	case <-ctx.Done():
		st, _ := m.Get(id)
		return st, ctx.Err()
	}
	return m.Get(id)
}

// Close cancels every run and waits for their goroutines to end.
func (m *Manager) Close() {
	m.cancel()
	m.wg.Wait()
}
