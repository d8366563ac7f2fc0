package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fakecloud/fakecloud-csi/pkg/csi/capacity"
)

// Bounds of `driver watch`.
const (
	// maxWatchBytes bounds one /debug/capacity answer (a DebugInfo is 1-2 KiB).
	maxWatchBytes = 256 << 10
	// maxWatchURLs bounds the plugins one watch follows.
	maxWatchURLs = 256
)

// watchCommand is `driver watch URL...`: every --interval, one line per node plugin (its
// --http-addr base URL) with what its capacity reporter says: the value reported, the target
// (the cloud's truth as its last reading gave it), the policy mode and the facts under them.
// It runs until Ctrl-C, or --count rounds.
func watchCommand(stdout io.Writer) *cobra.Command {
	interval, count := time.Second, 0
	cmd := &cobra.Command{
		Use:   "watch URL...",
		Short: "Print a node plugin's capacity state once a second: reported, target, mode, the cloud's facts (URL: its --http-addr, e.g. http://127.0.0.1:9809)",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 || len(args) > maxWatchURLs {
				return fmt.Errorf("watch: want 1 to %d plugin URLs (make run prints them: http://127.0.0.1:9809 ...)", maxWatchURLs)
			}
			var errs []error
			for _, a := range args {
				if u, err := url.Parse(a); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
					errs = append(errs, fmt.Errorf("watch: %q: want http(s)://host:port", a))
				}
			}
			return errors.Join(errs...)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if interval < 100*time.Millisecond {
				return fmt.Errorf("watch: --interval %v: at least 100ms", interval)
			}
			client := &http.Client{Timeout: min(interval, 2*time.Second)}
			t := time.NewTicker(interval)
			defer t.Stop()
			for round := 1; ; round++ {
				now := time.Now()
				for _, u := range args {
					if _, err := fmt.Fprintln(stdout, watchLine(cmd.Context(), client, strings.TrimRight(u, "/"), now)); err != nil {
						return err
					}
				}
				if count > 0 && round >= count {
					return nil
				}
				select {
				case <-cmd.Context().Done():
					return nil
				case <-t.C:
				}
			}
		},
	}
	cmd.Flags().DurationVar(&interval, "interval", interval, "time between rounds (at least 100ms)")
	cmd.Flags().IntVar(&count, "count", 0, "stop after this many rounds; 0: until Ctrl-C")
	return cmd
}

// watchLine is one plugin's line: its state, or why it could not be read.
func watchLine(ctx context.Context, client *http.Client, base string, now time.Time) string {
	stamp := now.Format("15:04:05")
	d, err := fetchDebug(ctx, client, base)
	var na *notPluginError
	switch {
	case errors.As(err, &na):
		// It answered: "unreachable" would send the user looking for a dead process.
		return fmt.Sprintf("%s %s %v", stamp, base, err)
	case err != nil:
		return fmt.Sprintf("%s %s unreachable: %v", stamp, base, err)
	}
	target := "—"
	if d.Target != nil {
		target = fmt.Sprint(*d.Target)
	}
	line := fmt.Sprintf("%s %-10s reported=%d target=%s mode=%s", stamp, d.NodeID, d.Reported, target, d.Mode)
	if in := d.Inputs; in != nil {
		line += fmt.Sprintf("  (cloud: limit %d, out of band %d, attached %d, quota headroom %d, revision %d)",
			in.AttachLimit, in.OutOfBandSlots, in.Attached, in.QuotaHeadroom, in.Revision)
	}
	if d.Damping > 0 {
		// A stretched window is why an increase waits longer than configured: say so here,
		// not only on /debug/capacity.
		line += fmt.Sprintf("  window %s (flap damping ×%d)", d.StabilityWindow, 1<<min(d.Damping, 30))
	}
	if d.LastErrorClass != "" {
		line += fmt.Sprintf("  last lookup failed: %s", d.LastErrorClass)
		if d.LastError != "" {
			line += fmt.Sprintf(" (%.120s)", d.LastError)
		}
	}
	return line
}

func fetchDebug(ctx context.Context, client *http.Client, base string) (*capacity.DebugInfo, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/debug/capacity", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxWatchBytes+1))
	switch {
	case err != nil:
		return nil, err
	case len(body) > maxWatchBytes:
		return nil, fmt.Errorf("/debug/capacity sent over %d bytes", maxWatchBytes)
	case resp.StatusCode != http.StatusOK:
		return nil, &notPluginError{status: resp.StatusCode, body: strings.TrimSpace(string(body))}
	}
	var d capacity.DebugInfo
	if err := json.Unmarshal(body, &d); err != nil {
		return nil, fmt.Errorf("/debug/capacity: %w", err)
	}
	return &d, nil
}

// notPluginError: the URL answered, but not with a node plugin's /debug/capacity (the fake
// cloud's API, a controller, another server).
type notPluginError struct {
	status int    // the HTTP status
	body   string // the answer's body, trimmed
}

func (e *notPluginError) Error() string {
	// The fake cloud's API answers every unknown route with its JSON error body
	// ({"code","message",...}, pkg/cloud.Error): the likeliest mistake is its URL given here.
	var cloudErr struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	if json.Unmarshal([]byte(e.body), &cloudErr) == nil && cloudErr.Code != "" && cloudErr.Message != "" {
		return fmt.Sprintf("answers like the fake cloud's API (%d %s), not a node plugin's /debug/capacity: "+
			"watch a node plugin's --http-addr (make run's listen on 127.0.0.1:9809 and up, one per node; it prints the watch line)", e.status, cloudErr.Code)
	}
	return fmt.Sprintf("is not a node plugin's debug endpoint: /debug/capacity answered %d: %.200s "+
		"(make run's node plugins listen on 127.0.0.1:9809 and up; it prints the watch line)", e.status, e.body)
}
