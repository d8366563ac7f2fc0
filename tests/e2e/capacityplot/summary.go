package capacityplot

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// WriteSummary writes rec as plain text: the per-node table of CSINode
// writes and update lag, every count change with its cloud cause, and the
// notes.
func WriteSummary(w io.Writer, rec *Recording) error {
	title := rec.Title
	if title == "" {
		title = "CSINode capacity over time"
	}
	fmt.Fprintf(w, "%s\ndriver %s, %s -> %s (%s), sample every %s\n\n", title, rec.Driver,
		rec.Start.Format(time.RFC3339), rec.End.Format(time.RFC3339), fmtDur(rec.End.Sub(rec.Start)), fmtDur(rec.Interval))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "node\twrites\tcount changes\ttruth changes\tmatched\tunmatched\tstale\tmissed\tlag min\tmedian\tp90\tmax\t")
	for _, s := range rec.Stats() {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t\n", s.Node, s.Writes, s.CountChanges, s.TruthChanges,
			s.Matched, s.Unmatched, s.Stale, s.Missed, fmtDur(s.LagMin), fmtDur(s.LagMedian), fmtDur(s.LagP90), fmtDur(s.LagMax))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\ncount changes (at = since start; lag = cloud change -> CSINode change):")
	for _, n := range rec.Nodes {
		for _, l := range rec.Lags[n] {
			line := fmt.Sprintf("  +%-8s %s %s -> %s", fmtDur(l.Change.At.Sub(rec.Start)), n, fmtCount(l.Change.Old), fmtCount(l.Change.New))
			if l.Matched {
				line += fmt.Sprintf("  lag %s after %s rev %d", fmtDur(l.Lag), l.Cloud.Cause, l.Cloud.Revision)
			} else {
				line += "  no matching cloud change"
			}
			if l.Stale {
				line += " (stale when written)"
			}
			fmt.Fprintln(w, line)
		}
	}
	for _, n := range rec.Notes {
		fmt.Fprintln(w, "note:", n)
	}
	_, err := fmt.Fprintln(w)
	return err
}
