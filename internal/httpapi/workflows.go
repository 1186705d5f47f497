package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/workflow"
)

// Workflows is what the event and workflow routes need of the workflow
// engine: one role per group of routes, each handler asking only for its
// own (*workflow.Service is the one implementation).
type Workflows interface {
	eventIngester
	workflowEditor
	runReader
}

// The roles of Workflows.
type (
	// eventIngester takes events in (events.go).
	eventIngester interface {
		Ingest(ctx context.Context, e workflow.EventRequest) (workflow.Accepted, error)
		IngestBatch(ctx context.Context, es []workflow.EventRequest) ([]workflow.BatchResult, error)
	}
	// workflowEditor keeps the definitions.
	workflowEditor interface {
		PutWorkflow(ctx context.Context, key string, body json.RawMessage) (workflow.Workflow, bool, error)
		Workflow(ctx context.Context, key string) (workflow.Workflow, error)
		Workflows(ctx context.Context) ([]workflow.Workflow, error)
		DeleteWorkflow(ctx context.Context, key string) (int, error)
	}
	// runReader reads runs and cancels them.
	runReader interface {
		Run(ctx context.Context, id string) (workflow.RunView, error)
		Runs(ctx context.Context, f workflow.RunFilter, cursor string, limit int) ([]workflow.RunView, string, error)
		Cancel(ctx context.Context, workflow, userID, runID string) ([]string, error)
	}
)

// noWorkflows is what the event and workflow routes answer (503) on a
// server without the workflow engine.
const noWorkflows = "workflows are not configured on this server"

// Scopes: sending events and canceling runs take notify:send, like
// sending a notification; reading definitions and runs notify:read;
// changing a definition, which affects every user, admin (as templates).
func (s *Server) registerWorkflows() {
	w := s.opts.Workflows
	ingest, edit := withService[eventIngester](w, noWorkflows), withService[workflowEditor](w, noWorkflows)
	runs := withService[runReader](w, noWorkflows)
	s.Handle("POST /v1/events", auth.ScopeNotifySend, ingest(postEvent))
	s.Handle("POST /v1/events/batch", auth.ScopeNotifySend, ingest(s.postEventBatch))
	s.Handle("PUT /v1/workflows/{key}", auth.ScopeAdmin, edit(putWorkflow))
	s.Handle("GET /v1/workflows/{key}", auth.ScopeNotifyRead, edit(getWorkflow))
	s.Handle("DELETE /v1/workflows/{key}", auth.ScopeAdmin, edit(deleteWorkflow))
	s.Handle("GET /v1/workflows", auth.ScopeNotifyRead, edit(listWorkflows))
	s.Handle("GET /v1/workflow-runs/{id}", auth.ScopeNotifyRead, runs(getWorkflowRun))
	s.Handle("GET /v1/workflows/{key}/runs", auth.ScopeNotifyRead, runs(workflowRuns))
	s.Handle("GET /v1/users/{id}/workflow-runs", auth.ScopeNotifyRead, runs(userWorkflowRuns))
	s.Handle("POST /v1/workflows/{key}/cancel", auth.ScopeNotifySend, runs(cancelWorkflowRuns))
	attrs := withService(s.opts.Attributes, "user attributes are not configured on this server")
	s.Handle("PUT /v1/users/{id}/attributes", auth.ScopeNotifySend, attrs(s.putAttributes))
	s.Handle("GET /v1/users/{id}/attributes", auth.ScopeNotifyRead, attrs(getAttributes))
}

func putWorkflow(svc workflowEditor, w http.ResponseWriter, r *http.Request) error {
	var body json.RawMessage
	if err := decodeJSON(r, &body); err != nil {
		return err
	}
	if !bytes.HasPrefix(bytes.TrimSpace(body), []byte("{")) {
		return fieldErrors(apperr.Invalid, "(body)", "must be an object")
	}
	key := r.PathValue("key")
	wf, created, err := svc.PutWorkflow(r.Context(), key, body)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		w.Header().Set("Location", "/v1/workflows/"+url.PathEscape(key))
	}
	writeJSON(w, status, &wf) // a pointer: MarshalJSON may have either receiver
	return nil
}

func getWorkflow(svc workflowEditor, w http.ResponseWriter, r *http.Request) error {
	wf, err := svc.Workflow(r.Context(), r.PathValue("key"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, &wf)
	return nil
}

func listWorkflows(svc workflowEditor, w http.ResponseWriter, r *http.Request) error {
	list, err := svc.Workflows(r.Context())
	if err != nil {
		return err
	}
	if list == nil {
		list = []workflow.Workflow{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": list})
	return nil
}

func deleteWorkflow(svc workflowEditor, w http.ResponseWriter, r *http.Request) error {
	key := r.PathValue("key")
	n, err := svc.DeleteWorkflow(r.Context(), key)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"key": key, "runs_canceled": n})
	return nil
}

func getWorkflowRun(svc runReader, w http.ResponseWriter, r *http.Request) error {
	run, err := svc.Run(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, &run)
	return nil
}

// workflowRuns lists one workflow's runs (?user_id=, ?status=).
func workflowRuns(svc runReader, w http.ResponseWriter, r *http.Request) error {
	return listRuns(svc, w, r, workflow.RunFilter{Workflow: r.PathValue("key"), UserID: r.URL.Query().Get("user_id")})
}

// userWorkflowRuns lists one user's runs (?workflow=, ?status=).
func userWorkflowRuns(svc runReader, w http.ResponseWriter, r *http.Request) error {
	return listRuns(svc, w, r, workflow.RunFilter{Workflow: r.URL.Query().Get("workflow"), UserID: r.PathValue("id")})
}

// listRuns answers a page of runs matching f narrowed by ?status=,
// newest first: {"items": [...], "next_cursor": ...}.
func listRuns(svc runReader, w http.ResponseWriter, r *http.Request, f workflow.RunFilter) error {
	limit, err := limitParam(r)
	if err != nil {
		return err
	}
	if st := workflow.Status(r.URL.Query().Get("status")); st != "" {
		switch st {
		case workflow.StatusRunning, workflow.StatusWaiting, workflow.StatusCompleted, workflow.StatusCanceled, workflow.StatusFailed:
			f.Status = st
		default:
			return fieldErrors(apperr.Invalid, "status", "must be running, waiting, completed, canceled or failed")
		}
	}
	runs, next, err := svc.Runs(r.Context(), f, r.URL.Query().Get("cursor"), limit)
	if err != nil {
		return err
	}
	if runs == nil {
		runs = []workflow.RunView{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": runs, "next_cursor": next})
	return nil
}

func cancelWorkflowRuns(svc runReader, w http.ResponseWriter, r *http.Request) error {
	var body struct {
		UserID string `json:"user_id"`
		RunID  string `json:"run_id"`
	}
	if err := decodeJSON(r, &body); err != nil {
		return err
	}
	if body.UserID == "" && body.RunID == "" {
		return &apperr.Error{Code: apperr.Unprocessable, Message: "name the runs to cancel: user_id or run_id",
			Fields: []apperr.FieldError{{Field: "user_id", Detail: "required when run_id is absent"},
				{Field: "run_id", Detail: "required when user_id is absent"}}}
	}
	ids, err := svc.Cancel(r.Context(), r.PathValue("key"), body.UserID, body.RunID)
	if err != nil {
		return err
	}
	if ids == nil {
		ids = []string{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"canceled": ids})
	return nil
}
