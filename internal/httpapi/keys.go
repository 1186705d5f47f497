package httpapi

import (
	"net/http"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/auth"
)

type keyRequest struct {
	Name   string   `json:"name"`
	Scopes []string `json:"scopes"`
}

type keyResponse struct {
	ID        string     `json:"id"`
	Name      string     `json:"name"`
	Prefix    string     `json:"prefix"`
	Scopes    []string   `json:"scopes"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
	Key       string     `json:"key,omitempty"` // the secret, only in the create response
}

func toKeyResponse(k auth.Key) keyResponse {
	out := keyResponse{ID: k.ID, Name: k.Name, Prefix: k.Prefix, CreatedAt: k.CreatedAt.UTC(), Scopes: make([]string, len(k.Scopes))}
	for i, s := range k.Scopes {
		out.Scopes[i] = string(s)
	}
	if !k.RevokedAt.IsZero() {
		t := k.RevokedAt.UTC()
		out.RevokedAt = &t
	}
	return out
}

func (s *Server) registerKeys() {
	s.Handle("POST /v1/keys", auth.ScopeAdmin, s.createKey)
	s.Handle("GET /v1/keys", auth.ScopeAdmin, func(w http.ResponseWriter, r *http.Request) error {
		keys, err := s.opts.Keys.ListAPIKeys(r.Context())
		if err != nil {
			return err
		}
		writeItems(w, keys, toKeyResponse)
		return nil
	})
	s.Handle("DELETE /v1/keys/{id}", auth.ScopeAdmin, func(w http.ResponseWriter, r *http.Request) error {
		if err := s.opts.Keys.RevokeAPIKey(r.Context(), r.PathValue("id")); err != nil {
			return err
		}
		s.auth.forget()
		if n, err := s.opts.Keys.CountActiveAPIKeys(r.Context()); err == nil && n == 0 {
			s.log.Warn(ClosedWarning)
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	})
}

// ClosedWarning is what a node logs when every API key it had is revoked
// (at the revocation, and at start while it stays so): the API is closed
// to every caller, loopback ones too, until a key is created against the
// database.
const ClosedWarning = "every API key has been revoked: the API is closed to every caller (keyless loopback access ended with the first key); " +
	"create an admin key with `sluice keys create --scope admin` against this node's database"

func (s *Server) createKey(w http.ResponseWriter, r *http.Request) error {
	var req keyRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	var fields []apperr.FieldError
	if req.Name == "" {
		fields = append(fields, apperr.FieldError{Field: "name", Detail: "is required"})
	}
	if len(req.Scopes) == 0 {
		fields = append(fields, apperr.FieldError{Field: "scopes", Detail: "at least one scope is required"})
	}
	scopes := make([]auth.Scope, 0, len(req.Scopes))
	for _, name := range req.Scopes {
		sc, err := auth.ParseScope(name)
		if err != nil {
			fields = append(fields, apperr.FieldError{Field: "scopes", Detail: err.Error()})
			continue
		}
		scopes = append(scopes, sc)
	}
	if err := apperr.Fields(apperr.Unprocessable, "the key request is invalid", fields); err != nil {
		return err
	}
	secret, key, err := auth.NewKey(req.Name, scopes, s.opts.Now(), nil)
	if err != nil {
		return err
	}
	if err := s.opts.Keys.CreateAPIKey(r.Context(), key); err != nil {
		return err
	}
	s.auth.forget()
	resp := toKeyResponse(key)
	resp.Key = secret
	writeJSON(w, http.StatusCreated, resp)
	return nil
}
