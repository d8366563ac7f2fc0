// Package monitoring holds the Prometheus rules of fakecloud-csi (rules.yaml, the same groups
// as a PrometheusRule in prometheusrule.yaml) and their promtool unit tests (rules_test.yaml).
// Its Go test keeps the files and docs/runbook.md in step; promtool runs the rules' own tests
// (hack/promtool-test.sh).
package monitoring

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

type rule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

type group struct {
	Name  string `json:"name"`
	Rules []rule `json:"rules"`
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func rulesFile(t *testing.T) []group {
	t.Helper()
	var f struct {
		Groups []group `json:"groups"`
	}
	readYAML(t, "rules.yaml", &f)
	return f.Groups
}

// wantAlerts are the alerts the operations issue asks for, one per failure mode, the
// start-up cluster check's fallback, and an increase held back (a flapping truth).
var wantAlerts = []string{
	"FakeCloudCSIAttachErrors",
	"FakeCloudCSIAttachResourceExhausted",
	"FakeCloudCSICSINodeWriteRateHigh",
	"FakeCloudCSICapacityDrift",
	"FakeCloudCSICapacityHeldBelowCloud",
	"FakeCloudCSICapacityStale",
	"FakeCloudCSIDynamicCapacityUnsupported",
	"FakeCloudCSINodeAtFloor",
	"FakeCloudUnavailable",
}

func TestPrometheusRuleMatchesRulesFile(t *testing.T) {
	var pr struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name   string            `json:"name"`
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
		Spec struct {
			Groups []group `json:"groups"`
		} `json:"spec"`
	}
	readYAML(t, "prometheusrule.yaml", &pr)
	if pr.APIVersion != "monitoring.coreos.com/v1" || pr.Kind != "PrometheusRule" || pr.Metadata.Name == "" {
		t.Errorf("prometheusrule.yaml is %s %s %q, want a named monitoring.coreos.com/v1 PrometheusRule", pr.APIVersion, pr.Kind, pr.Metadata.Name)
	}
	if groups := rulesFile(t); !reflect.DeepEqual(groups, pr.Spec.Groups) {
		t.Errorf("prometheusrule.yaml spec.groups differ from rules.yaml groups; regenerate it (see its header)")
	}
}

func TestEveryAlertIsCompleteAndHasARunbook(t *testing.T) {
	runbook, err := os.ReadFile(filepath.Join("..", "..", "docs", "runbook.md"))
	if err != nil {
		t.Fatal(err)
	}
	// GitHub anchors of "## Heading" lines: lower case, spaces to dashes.
	anchors := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^##+ (.+)$`).FindAllStringSubmatch(string(runbook), -1) {
		anchors[strings.ReplaceAll(strings.ToLower(strings.TrimSpace(m[1])), " ", "-")] = true
	}
	var names []string
	for _, g := range rulesFile(t) {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			names = append(names, r.Alert)
			if r.For == "" {
				t.Errorf("%s: no for:, a single bad scrape would page", r.Alert)
			}
			if s := r.Labels["severity"]; s != "warning" && s != "critical" {
				t.Errorf("%s: severity %q, want warning or critical", r.Alert, s)
			}
			for _, a := range []string{"summary", "description", "runbook_url"} {
				if r.Annotations[a] == "" {
					t.Errorf("%s: no %s annotation", r.Alert, a)
				}
			}
			url := r.Annotations["runbook_url"]
			_, anchor, ok := strings.Cut(url, "docs/runbook.md#")
			if !ok || anchor != strings.ToLower(r.Alert) {
				t.Errorf("%s: runbook_url %q, want docs/runbook.md#%s", r.Alert, url, strings.ToLower(r.Alert))
			} else if !anchors[anchor] {
				t.Errorf("%s: docs/runbook.md has no section %q", r.Alert, r.Alert)
			}
		}
	}
	sort.Strings(names)
	if !slices.Equal(names, wantAlerts) {
		t.Errorf("alerts %v, want %v", names, wantAlerts)
	}
}

func TestEveryAlertIsUnitTestedBothWays(t *testing.T) {
	var f struct {
		RuleFiles          []string `json:"rule_files"`
		EvaluationInterval string   `json:"evaluation_interval"`
		Tests              []struct {
			Interval       string `json:"interval"`
			InputSeries    []any  `json:"input_series"`
			AlertRuleTests []struct {
				EvalTime  string `json:"eval_time"`
				Alertname string `json:"alertname"`
				ExpAlerts []any  `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	readYAML(t, "rules_test.yaml", &f)
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, tc := range f.Tests {
		for _, a := range tc.AlertRuleTests {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				silent[a.Alertname] = true
			}
		}
	}
	for _, name := range wantAlerts {
		if !fires[name] || !silent[name] {
			t.Errorf("rules_test.yaml: %s fires in a test: %v, stays silent in one: %v; want both", name, fires[name], silent[name])
		}
	}
}
