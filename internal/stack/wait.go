package stack

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// pollInterval is the pause between two readiness checks: short, since a test stack is
// ready in milliseconds, and a check is one local request.
const pollInterval = 20 * time.Millisecond

// WaitHTTP waits until GET url answers 200, for up to timeout; the error names the last
// answer or failure.
func WaitHTTP(ctx context.Context, url string, timeout time.Duration) error {
	hc := &http.Client{Timeout: 2 * time.Second}
	return Poll(ctx, timeout, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		return nil
	})
}

// WaitProbe waits until the CSI plugin at endpoint (unix:///path) answers Probe with
// ready=true, for up to timeout. It waits for the socket file first: gRPC's reconnection
// back-off, grown while nothing listened, would otherwise add seconds after it appears.
func WaitProbe(ctx context.Context, endpoint string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if path, ok := strings.CutPrefix(endpoint, "unix://"); ok {
		err := Poll(ctx, timeout, func(context.Context) error {
			_, err := os.Stat(path)
			return err
		})
		if err != nil {
			return err
		}
	}
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("dial %s: %w", endpoint, err)
	}
	defer conn.Close()
	ids := csi.NewIdentityClient(conn)
	return Poll(ctx, timeout, func(ctx context.Context) error {
		resp, err := ids.Probe(ctx, &csi.ProbeRequest{}, grpc.WaitForReady(true))
		if err != nil {
			return err
		}
		if !resp.GetReady().GetValue() {
			return fmt.Errorf("probe of %s: not ready", endpoint)
		}
		return nil
	})
}

// Poll calls check every pollInterval until it returns nil, ctx ends or timeout passes;
// the error carries check's last error (the last one the deadline did not cut short). Each
// check gets the time left.
func Poll(ctx context.Context, timeout time.Duration, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		// A check cut short by the deadline says less than the one before it.
		if last == nil || ctx.Err() == nil {
			last = err
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("timed out after %s: last error: %w", timeout, last)
			}
			return fmt.Errorf("%w: last error: %w", ctx.Err(), last)
		case <-time.After(pollInterval):
		}
	}
}
