package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	"k8s.io/klog/v2"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/scenario"
)

// createScenario starts the timeline in the body (YAML or JSON, package scenario) and answers
// its first status. A body whose YAML aliases expand past scenario.MaxExpandedBytes is 413
// PayloadTooLarge, refused before anything expands them; any other invalid one is 400. Its
// steps call the server's admin operations in process (scenarioAPI) with the caller's role.
func (s *Server) createScenario(r *http.Request, c caller) (*reply, error) {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, bodyError(err)
	}
	sc, err := scenario.Parse(data)
	if errors.Is(err, scenario.ErrExpandedTooLarge) {
		// An alias bomb: refused before anything expanded it.
		return nil, cloud.NewError(cloud.CodePayloadTooLarge, "%v", err)
	}
	if err != nil {
		return nil, cloud.NewError(cloud.CodeInvalidArgument, "%v", err)
	}
	api := scenarioAPI{s: s, caller: c}
	logger := klog.FromContext(r.Context())
	started := func(st scenario.Status) error {
		_, err := s.store.RecordEvents([]cloud.Event{{Type: "ScenarioStarted",
			Detail: cloud.TruncateMessage(fmt.Sprintf("%s name=%s steps=%d", st.ID, sc.Name, st.Steps))}})
		return err
	}
	st, err := s.scenarios.Start(sc, api, started, func(id string, res scenario.StepResult) {
		detail := fmt.Sprintf("%s +%v %s", id, res.At, res.Step)
		if res.Error != "" {
			detail += " failed: " + res.Error
		}
		if _, err := s.store.RecordEvents([]cloud.Event{{Type: "ScenarioStep", Detail: cloud.TruncateMessage(detail)}}); err != nil {
			logger.Error(err, "Cannot record a scenario step", "scenario", id)
		}
	})
	if err != nil {
		return nil, err
	}
	logger.Info("Scenario started", "scenario", st.ID, "name", sc.Name, "steps", st.Steps)
	return created(st, 0), nil
}

func (s *Server) listScenarios(*http.Request, caller) (*reply, error) {
	return ok(s.scenarios.List(), 0), nil
}

func (s *Server) getScenario(r *http.Request, _ caller) (*reply, error) {
	st, err := s.scenarios.Get(pathVar(r, "id"))
	if err != nil {
		return nil, err
	}
	return ok(st, 0), nil
}

// cancelScenario stops a running scenario before its next step (a finished one stays as it
// is) and answers its status.
func (s *Server) cancelScenario(r *http.Request, _ caller) (*reply, error) {
	st, err := s.scenarios.Cancel(r.Context(), pathVar(r, "id"))
	if err != nil {
		return nil, err
	}
	return ok(st, 0), nil
}
