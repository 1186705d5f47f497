package httpapi

import (
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/workflow"
)

// eventAcceptedJSON answers an event: the runs it started and resumed,
// lists never null.
type eventAcceptedJSON struct {
	EventID     string   `json:"event_id"`
	RunsStarted []string `json:"runs_started"`
	RunsResumed []string `json:"runs_resumed"`
}

func eventAccepted(a workflow.Accepted) eventAcceptedJSON {
	out := eventAcceptedJSON{EventID: a.EventID, RunsStarted: a.RunsStarted, RunsResumed: a.RunsResumed}
	if out.RunsStarted == nil {
		out.RunsStarted = []string{}
	}
	if out.RunsResumed == nil {
		out.RunsResumed = []string{}
	}
	return out
}

// postEvent takes one event in: 202 once it is saved with the runs it
// started and resumed; 200 with the first answer on a repeated
// request_id (or Idempotency-Key), 409 when that request_id came with
// another body.
func postEvent(svc eventIngester, w http.ResponseWriter, r *http.Request) error {
	var e workflow.EventRequest
	if err := decodeJSON(r, &e); err != nil {
		return err
	}
	if key := strings.TrimSpace(r.Header.Get("Idempotency-Key")); key != "" {
		if e.RequestID != "" && e.RequestID != key {
			return fieldErrors(apperr.Unprocessable, "request_id", "differs from the Idempotency-Key header")
		}
		e.RequestID = key
	}
	a, err := svc.Ingest(r.Context(), e)
	if err != nil {
		return err
	}
	status := http.StatusAccepted
	if a.Duplicate {
		status = http.StatusOK
	}
	writeJSON(w, status, eventAccepted(a))
	return nil
}

// eventBatchResult is one item of an event batch's answer: the event, or
// the problem that refused it.
type eventBatchResult struct {
	*eventAcceptedJSON          // nil when refused
	Status             string   `json:"status"` // accepted, duplicate or refused
	Error              *Problem `json:"error,omitempty"`
}

// postEventBatch takes up to maxBatch events in, answering one result per
// event, in order, as POST /v1/notifications/batch does.
func (s *Server) postEventBatch(svc eventIngester, w http.ResponseWriter, r *http.Request) error {
	var body struct {
		Events []workflow.EventRequest `json:"events"`
	}
	if err := decodeJSON(r, &body); err != nil {
		return err
	}
	if n := len(body.Events); n == 0 || n > maxBatch {
		return fieldErrors(apperr.Unprocessable, "events", "must hold 1 to "+strconv.Itoa(maxBatch)+" events")
	}
	answers, err := svc.IngestBatch(r.Context(), body.Events)
	if err != nil {
		return err
	}
	if len(answers) != len(body.Events) {
		return apperr.New(apperr.Internal, "the batch answered %d results for %d events", len(answers), len(body.Events))
	}
	results := make([]eventBatchResult, len(answers))
	counts := map[string]int{"accepted": 0, "duplicate": 0, "refused": 0}
	for i, a := range answers {
		switch {
		case a.Error != nil:
			p := problemOf(a.Error)
			if p.Status >= 500 {
				s.log.LogAttrs(r.Context(), slog.LevelError, "batch item failed",
					slog.String(logKeyRequestID, w.Header().Get(headerRequestID)), slog.Int("item", i), slog.Any("error", a.Error))
			}
			results[i] = eventBatchResult{Status: "refused", Error: &p}
		default:
			ok := eventAccepted(a.Accepted)
			results[i] = eventBatchResult{eventAcceptedJSON: &ok, Status: "accepted"}
			if a.Duplicate {
				results[i].Status = "duplicate"
			}
		}
		counts[results[i].Status]++
	}
	writeJSON(w, http.StatusOK, map[string]any{"results": results, "accepted": counts["accepted"],
		"duplicates": counts["duplicate"], "refused": counts["refused"]})
	return nil
}
