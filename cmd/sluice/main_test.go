package main

import (
	"net/http"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/httpapi"
	"github.com/sluicehq/sluice/internal/httpapi/apitest"
)

// apiValidator checks every exchange these tests make through
// http.DefaultClient (the commands run in-process), apiClient (get, call,
// send ...) or apiTransport against the OpenAPI document the nodes serve;
// TestMain fails the run if any disagreed, and reports the count.
var apiValidator = apitest.Must(httpapi.OpenAPI("http://127.0.0.1:8080"))

// apiTransport is the validating transport, for the tests' own clients.
var apiTransport = apiValidator.Transport(http.DefaultTransport)

// apiClient is the tests' HTTP client: every exchange validated, and none
// waits more than a minute, so a node that stops answering fails the test
// instead of hanging it.
var apiClient = &http.Client{Transport: apiTransport, Timeout: time.Minute}

// noFollow is apiClient without following redirects, to see a short
// link's answer itself.
var noFollow = &http.Client{Transport: apiTransport, Timeout: time.Minute,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func TestMain(m *testing.M) { apiValidator.Main(m, apiTransport, "cmd/sluice") }
