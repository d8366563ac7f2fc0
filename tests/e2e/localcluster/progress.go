package localcluster

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// progressPeriod is how often a long build says where it is: docs/local-cluster.md promises no step is
// silent for more than 30 s.
const progressPeriod = 30 * time.Second

// progress reports a long build: "step N/M: what" as each step starts and, every period
// while the build runs, the step, the elapsed time and how many packages `go build -v` has
// compiled out of the most it may compile (go list -deps), so that a cold build of 20-45
// minutes is never silent and says how far it got.
//
// Its Write takes the go command's stderr: package lines (-v's import paths) are counted,
// everything else (errors, "go: downloading ...") passes through to out.
type progress struct {
	out   io.Writer
	start time.Time
	steps int

	mu       sync.Mutex
	step     int
	what     string
	compiled int
	// total is the packages the build may compile (0: unknown); cached ones are never
	// compiled, so the count usually ends below it.
	total   int
	partial []byte
}

func newProgress(out io.Writer, steps int, start time.Time) *progress {
	return &progress{out: out, steps: steps, start: start}
}

// next starts the next step and says so.
func (p *progress) next(what string) {
	p.mu.Lock()
	p.step++
	p.what = what
	line := fmt.Sprintf("step %d/%d: %s (%s elapsed)\n", p.step, p.steps, what, p.elapsed())
	p.mu.Unlock()
	_, _ = io.WriteString(p.out, line)
}

// setTotal sets the packages the build may compile.
func (p *progress) setTotal(n int) {
	p.mu.Lock()
	p.total = n
	p.mu.Unlock()
}

func (p *progress) elapsed() time.Duration { return time.Since(p.start).Round(time.Second) }

// line is what the ticker prints.
func (p *progress) line() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := fmt.Sprintf("  ... step %d/%d (%s), %s elapsed", p.step, p.steps, p.what, p.elapsed())
	if p.compiled > 0 || p.total > 0 {
		s += fmt.Sprintf(": %d packages compiled", p.compiled)
		if p.total > 0 {
			s += fmt.Sprintf(" of at most %d (the rest come from Go's build cache)", p.total)
		}
	}
	return s + "\n"
}

// Write counts -v's package lines and passes every other line on.
func (p *progress) Write(b []byte) (int, error) {
	p.mu.Lock()
	data := append(p.partial, b...) //nolint:gocritic // p.partial is replaced by a copy below
	var pass bytes.Buffer
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		line := string(data[:i])
		data = data[i+1:]
		if isPackageLine(line) {
			p.compiled++
			continue
		}
		pass.WriteString(line + "\n")
	}
	p.partial = append([]byte(nil), data...)
	p.mu.Unlock()
	if pass.Len() > 0 {
		if _, err := p.out.Write(pass.Bytes()); err != nil {
			return 0, err
		}
	}
	return len(b), nil
}

// flush passes on a last line without a newline.
func (p *progress) flush() {
	p.mu.Lock()
	rest := p.partial
	p.partial = nil
	p.mu.Unlock()
	if len(rest) > 0 && !isPackageLine(string(rest)) {
		_, _ = p.out.Write(append(rest, '\n'))
	}
}

// isPackageLine reports a line of go build -v: one import path, no spaces. Compiler errors
// ("# pkg", "file.go:1:2: msg") and the go command's messages have spaces.
func isPackageLine(l string) bool {
	return l != "" && !strings.ContainsAny(l, " \t#:")
}

// tick prints line() every period until the returned stop is called.
func (p *progress) tick(period time.Duration) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_, _ = io.WriteString(p.out, p.line())
			}
		}
	}()
	return func() { close(done); <-finished }
}
