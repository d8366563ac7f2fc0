package localcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"k8s.io/klog/v2"
)

// stopGrace is how long a component gets between SIGTERM and SIGKILL.
const stopGrace = 10 * time.Second

// restartDelay is the pause before a crashed component is started again, like
// a kubelet's first crash-loop back-off.
const restartDelay = time.Second

// procSpec describes one component process.
type procSpec struct {
	// Name is unique in the cluster; it names the log and pid files.
	Name string
	Path string
	Args []string
	// Restart starts the process again when it exits by itself, as a kubelet
	// restarts a container: S9 kills the controller plugin and expects it back.
	Restart bool
	// Node marks a node's component (hollow kubelet, node plugin): stopAll stops
	// these stopParallel at a time before the rest, since at a hundred nodes one
	// after the other took minutes.
	Node bool
}

// stopParallel bounds the node components stopAll stops at once.
const stopParallel = 16

// proc is a started component.
type proc struct {
	spec    procSpec
	logPath string
	pidPath string

	mu sync.Mutex
	// path is the binary the next launch runs: spec.Path until resume
	// swaps it.
	path    string
	cmd     *exec.Cmd
	stopped bool
	exited  chan struct{} // closed when the current cmd has exited
	done    chan struct{} // closed when the current supervisor loop ends
}

// supervisor starts components with their output in logDir and their pids in
// pidDir, restarts the ones that ask for it, and stops them all in reverse
// start order.
type supervisor struct {
	logDir, pidDir string

	mu    sync.Mutex
	procs []*proc
}

func newSupervisor(logDir, pidDir string) (*supervisor, error) {
	for _, d := range []string{logDir, pidDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("create %s: %w", d, err)
		}
	}
	return &supervisor{logDir: logDir, pidDir: pidDir}, nil
}

// start launches spec and returns once the process exists.
func (s *supervisor) start(ctx context.Context, spec procSpec) (*proc, error) {
	p := &proc{
		spec:    spec,
		logPath: filepath.Join(s.logDir, spec.Name+".log"),
		pidPath: filepath.Join(s.pidDir, spec.Name+".pid"),
		path:    spec.Path,
		done:    make(chan struct{}),
	}
	if err := p.launch(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.procs = append(s.procs, p)
	s.mu.Unlock()
	go p.supervise(ctx, p.done)
	return p, nil
}

// resume starts a stopped process again, running binary instead of the
// previous one when binary is not empty, and supervises it as start does:
// a rolling update of one component. It fails when p is not stopped.
func (p *proc) resume(ctx context.Context, binary string) error {
	p.mu.Lock()
	if !p.stopped {
		p.mu.Unlock()
		return fmt.Errorf("resume %s: it is not stopped", p.spec.Name)
	}
	select {
	case <-p.done:
	default:
		p.mu.Unlock()
		return fmt.Errorf("resume %s: its previous supervisor loop still runs", p.spec.Name)
	}
	if binary != "" {
		p.path = binary
	}
	p.stopped = false
	done := make(chan struct{})
	p.done = done
	p.mu.Unlock()
	if err := p.launch(); err != nil {
		p.mu.Lock()
		p.stopped = true
		p.mu.Unlock()
		close(done)
		return err
	}
	go p.supervise(ctx, done)
	return nil
}

// binary is the path the process runs (or ran last).
func (p *proc) binary() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.path
}

func (p *proc) launch() error {
	logFile, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open log of %s: %w", p.spec.Name, err)
	}
	path := p.binary()
	fmt.Fprintf(logFile, "=== %s start: %s %q\n", time.Now().Format(time.RFC3339Nano), path, p.spec.Args)
	cmd := exec.Command(path, p.spec.Args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Own process group: a terminal's Ctrl-C reaches the harness only, which
	// then stops the components in order. Pdeathsig covers a harness killed
	// with SIGKILL.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("start %s: %w", p.spec.Name, err)
	}
	exited := make(chan struct{})
	go func() {
		err := cmd.Wait()
		fmt.Fprintf(logFile, "=== %s exit: %v\n", time.Now().Format(time.RFC3339Nano), err)
		logFile.Close()
		close(exited)
	}()
	if err := os.WriteFile(p.pidPath, []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644); err != nil {
		return fmt.Errorf("write pid of %s: %w", p.spec.Name, err)
	}
	p.mu.Lock()
	p.cmd, p.exited = cmd, exited
	p.mu.Unlock()
	return nil
}

// supervise restarts the process when it exits by itself and closes done
// when it gives up or the process was stopped.
func (p *proc) supervise(ctx context.Context, done chan struct{}) {
	defer close(done)
	for {
		p.mu.Lock()
		exited := p.exited
		p.mu.Unlock()
		<-exited
		p.mu.Lock()
		stopped := p.stopped
		p.mu.Unlock()
		if stopped || !p.spec.Restart || ctx.Err() != nil {
			if !stopped {
				klog.InfoS("Component exited", "component", p.spec.Name, "log", p.logPath)
			}
			return
		}
		klog.InfoS("Component exited, restarting", "component", p.spec.Name, "log", p.logPath)
		select {
		case <-ctx.Done():
			return
		case <-time.After(restartDelay):
		}
		p.mu.Lock()
		if p.stopped {
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		if err := p.launch(); err != nil {
			klog.ErrorS(err, "Restart failed", "component", p.spec.Name)
			return
		}
	}
}

// running reports whether the process is alive now.
func (p *proc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM to the process group, then SIGKILL after stopGrace. It
// loops because the supervisor may have launched a restart just before it
// saw the stop.
func (p *proc) stop() {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	for {
		p.mu.Lock()
		cmd, exited, done := p.cmd, p.exited, p.done
		p.mu.Unlock()
		select {
		case <-exited:
		default:
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(stopGrace):
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-exited
			}
		}
		select {
		case <-done:
			_ = os.Remove(p.pidPath)
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// stopAll stops every component: the nodes' first, stopParallel at a time, then the
// others one by one, the last started first.
func (s *supervisor) stopAll() {
	s.mu.Lock()
	procs := append([]*proc(nil), s.procs...)
	s.procs = nil
	s.mu.Unlock()
	var wg sync.WaitGroup
	sem := make(chan struct{}, stopParallel)
	for _, p := range procs {
		if !p.spec.Node {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			p.stop()
		})
	}
	wg.Wait()
	for i := len(procs) - 1; i >= 0; i-- {
		if !procs[i].spec.Node {
			procs[i].stop()
		}
	}
}

// find returns the started component called name.
func (s *supervisor) find(name string) (*proc, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.procs {
		if p.spec.Name == name {
			return p, nil
		}
	}
	return nil, errors.New("no component " + name)
}
