package httpapi

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/httpapi/apitest"
)

// served validates every exchange this package's tests make through serve
// against the document GET /openapi.json serves.
var served = apitest.Must(openAPIDoc)

// TestMain reports how many exchanges were validated, and fails the run
// if any disagreed (fuzz targets cannot fail from serve itself).
func TestMain(m *testing.M) {
	os.Exit(served.Report(os.Stderr, "httpapi", m.Run()))
}

// serve runs req through h and returns the response, failing t when the
// exchange disagrees with the OpenAPI document.
func serve(t testing.TB, h http.Handler, req *http.Request) *http.Response {
	return record(t, h, req).Result()
}

// record is serve returning the recorder.
func record(t testing.TB, h http.Handler, req *http.Request) *httptest.ResponseRecorder {
	_, fuzzing := t.(*testing.F)
	if !fuzzing {
		t.Helper()
	}
	var reqBody []byte
	if req.Body != nil {
		reqBody, _ = io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(reqBody))
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if err := served.Check(req, reqBody, rec.Result(), rec.Body.Bytes()); err != nil && !fuzzing {
		t.Errorf("the exchange disagrees with openapi.json: %v", err)
	}
	return rec
}

// TestValidatorFailsOnDrift proves the validation has teeth: a server
// that answers a status the document does not list, or a body its schema
// refuses, or accepts a request the document forbids, is caught, through
// the transport wrapper the end-to-end tests use; a deliberately bad
// request that is refused is not held against the server.
func TestValidatorFailsOnDrift(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mux := http.NewServeMux()
	mux.Handle("/", b.srv)
	// Drifted answers, registered over the real routes (with the request
	// id the server's frame adds to every answer).
	drifted := http.NewServeMux()
	mux.Handle("/healthz", withRequestID(drifted))
	mux.Handle("/readyz", withRequestID(drifted))
	mux.Handle("POST /v1/links", withRequestID(drifted))
	drifted.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot)
	})
	drifted.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status": 7, "checks": "none"}`))
	})
	drifted.HandleFunc("POST /v1/links", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"code": "abc"}`))
	})
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	v := apitest.Must(openAPIDoc) // its own, so these failures fail nothing else
	client := &http.Client{Transport: v.Transport(nil)}
	get := func(path string) {
		resp, err := client.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	post := func(path, ct, body string) {
		resp, err := client.Post(ts.URL+path, ct, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	get("/v1/keys")                                     // keyless loopback: 200, as documented
	post("/v1/keys", "application/json", `{"name": 1}`) // refused 400: the bad request is not held against the server
	post("/v1/keys", "application/xml", `<key/>`)       // refused 415, documented
	if f := v.Failures(); len(f) != 0 {
		t.Fatalf("documented exchanges failed validation: %q", f)
	}
	get("/healthz")
	get("/readyz")
	post("/v1/links", "application/json", `{"url": 5}`) // accepted with 201: the request is validated too
	want := []string{"GET /healthz (operation GET /healthz; Content-Type \"\", 0 body bytes): response 418",
		"GET /readyz (operation GET /readyz; Content-Type \"\", 0 body bytes): response 200",
		"POST /v1/links (operation POST /v1/links; Content-Type \"application/json\", 10 body bytes): request"}
	got := v.Failures()
	if len(got) != len(want) {
		t.Fatalf("failures = %q, want %d", got, len(want))
	}
	for i, w := range want {
		if !strings.Contains(got[i], w) {
			t.Errorf("failure %d = %q, want it to name %q", i, got[i], w)
		}
	}
	if st := v.Stats(); st.Exchanges != 6 || st.Failures != 3 {
		t.Errorf("stats = %+v, want 6 responses validated, 3 failures", st)
	}
}

func withRequestID(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(headerRequestID, "drifted-1")
		h.ServeHTTP(w, r)
	})
}

// TestSettingsSchema checks the Settings schema against what the server
// answers: user_id, updated_at and a null quiet_hours are allowed, a field
// it does not name is not.
func TestSettingsSchema(t *testing.T) {
	t.Parallel()
	v := apitest.Must(openAPIDoc)
	check := func(body string) error {
		req := httptest.NewRequest("GET", "/v1/users/ann/settings", nil)
		resp := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}, headerRequestID: {"r-1"}}}
		return v.Check(req, nil, resp, []byte(body))
	}
	base := `"user_id":"ann","channels":{"email":true},"categories":{"critical":true},"contacts":{},"locale":"en","timezone":"UTC"`
	for _, ok := range []string{
		`{` + base + `,"quiet_hours":null}`,
		`{` + base + `,"quiet_hours":{"start":"22:00","end":"07:00"},"updated_at":"2026-11-01T12:00:00Z"}`,
	} {
		if err := check(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{
		`{` + base + `,"quiet_hours":null,"bogus":1}`,
		`{` + base + `,"quiet_hours":{"start":"22:00","extra":1}}`,
		`{` + base + `}`, // quiet_hours is always answered
	} {
		if err := check(bad); err == nil {
			t.Errorf("%s passed validation, want a failure", bad)
		}
	}
}
