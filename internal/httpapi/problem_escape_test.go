package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// TestProblemKeepsAngleBrackets: a detail that shows a placeholder reads
// "Bearer <key>" on the wire, not "Bearer \u003ckey\u003e".
func TestProblemKeepsAngleBrackets(t *testing.T) {
	t.Parallel()
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodGet, "/v1/links", nil)
	WriteProblem(w, r, Problem{Type: ProblemBase + "unauthorized", Title: "Unauthorized", Status: http.StatusUnauthorized,
		Detail: "missing API key: send Authorization: Bearer <key> & retry"})
	body := w.Body.String()
	if !strings.Contains(body, `"detail":"missing API key: send Authorization: Bearer <key> & retry"`) {
		t.Errorf("problem body %s, want the detail unescaped", body)
	}
	if n, _ := strconv.Atoi(w.Header().Get("Content-Length")); n != len(body) {
		t.Errorf("Content-Length %d for a body of %d bytes", n, len(body))
	}
	var p Problem
	if err := json.Unmarshal([]byte(body), &p); err != nil || p.Status != http.StatusUnauthorized {
		t.Errorf("problem body %s does not decode: %v", body, err)
	}
}
