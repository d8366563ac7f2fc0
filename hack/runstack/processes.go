package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/fakecloud/fakecloud-csi/internal/stack"
)

// processes is make run's stack.Launcher: each component a child process of BIN whose
// output is appended to logDir/<ID>.log. A child in this process group gets a terminal's
// Ctrl-C as make run's others do.
type processes struct {
	bin, logDir string
	// onExit is called when a component exits, from the goroutine that waited for it.
	onExit func()

	mu     sync.Mutex
	procs  []*proc
	exited chan *proc // each component once, when it exits
}

// proc is one started component.
type proc struct {
	name, log string
	cmd       *exec.Cmd
	done      chan struct{} // closed once it exited and status is set
	status    int           // as bash's wait says it: the exit code, or 128+signal
}

func newProcesses(bin, logDir string) *processes {
	return &processes{bin: bin, logDir: logDir, onExit: func() {}, exited: make(chan *proc, 1024)}
}

// Launch starts c as BIN/<Program> with its Args.
func (ps *processes) Launch(_ context.Context, c stack.Component) error {
	logPath := filepath.Join(ps.logDir, c.ID+".log")
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(ps.bin, c.Program), c.Args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return err
	}
	p := &proc{name: c.Name, log: logPath, cmd: cmd, done: make(chan struct{})}
	ps.mu.Lock()
	ps.procs = append(ps.procs, p)
	ps.mu.Unlock()
	go func() {
		_ = cmd.Wait()
		_ = log.Close()
		p.status = waitStatus(cmd.ProcessState)
		close(p.done)
		ps.exited <- p
		ps.onExit()
	}()
	return nil
}

// waitStatus is bash's $? of a process that ended so.
func waitStatus(s *os.ProcessState) int {
	if ws, ok := s.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return s.ExitCode()
}

func (ps *processes) all() []*proc {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return append([]*proc(nil), ps.procs...)
}

func (p *proc) hasExited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stopAll sends SIGTERM to every component still running and waits until all exited.
func (ps *processes) stopAll() {
	for _, p := range ps.all() {
		if !p.hasExited() {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	for _, p := range ps.all() {
		<-p.done
	}
}

// supervise waits for a signal (then stops everything and returns 0) or for a component to
// exit: status 0 is a stop on a signal that reached the components but not this program;
// another status is a failure, reported with the end of the exited components' logs.
func (ps *processes) supervise(ctx context.Context, stdout, stderr io.Writer, runDir string) int {
	var first *proc
	select {
	case <-ctx.Done():
		ps.stopAll()
		return 0
	case first = <-ps.exited:
	}
	dead := ps.exitedNames()
	if first.status == 0 {
		fmt.Fprintf(stdout, "%s stopped on a signal; stopping the others\n", strings.Join(dead, ","))
		ps.stopAll()
		return 0
	}
	fmt.Fprintf(stderr, "%s exited (status %d); stopping the others\n", strings.Join(dead, ","), first.status)
	ps.stopAll()
	ps.report(stderr, runDir, dead)
	return 1
}

// exitedNames are the components that have exited by now, in start order.
func (ps *processes) exitedNames() []string {
	var names []string
	for _, p := range ps.all() {
		if p.hasExited() {
			names = append(names, p.name)
		}
	}
	return names
}

// report shows the end of the log of each component of names (those that exited by
// themselves: the others' logs are mostly empty and would bury its one line), or, when
// there is none, where the logs are.
func (ps *processes) report(w io.Writer, runDir string, names []string) {
	shown := false
	for _, p := range ps.all() {
		for _, n := range names {
			if p.name != n {
				continue
			}
			fmt.Fprintf(w, "run.sh failed: %s exited; the end of its log %s:\n", p.name, p.log)
			if err := tail(w, p.log, 20); err != nil {
				fmt.Fprintln(w, err)
			}
			shown = true
		}
	}
	if !shown {
		fmt.Fprintf(w, "run.sh failed; logs in %s\n", filepath.Join(runDir, "logs"))
	}
}

// tail writes the last n lines of the file at path (of its last MiB).
func tail(w io.Writer, path string, n int) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	const window = 1 << 20
	if st, err := f.Stat(); err == nil && st.Size() > window {
		if _, err := f.Seek(-window, io.SeekEnd); err != nil {
			return err
		}
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return err
	}
	lines := strings.SplitAfter(string(data), "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	_, err = io.WriteString(w, strings.Join(lines[max(0, len(lines)-n):], ""))
	if err == nil && len(lines) > 0 && !strings.HasSuffix(lines[len(lines)-1], "\n") {
		_, err = io.WriteString(w, "\n")
	}
	return err
}
