package e2e

import (
	"net/http"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/httpapi"
	"github.com/sluicehq/sluice/internal/httpapi/apitest"
)

// apiValidator checks every exchange these tests make through apiClient
// (child.request, cluster.call ...) or apiTransport against the OpenAPI
// document the nodes serve; TestMain fails the run if any disagreed, and
// reports the count.
var apiValidator = apitest.Must(httpapi.OpenAPI("http://127.0.0.1:8080"))

// apiTransport is the validating transport, for the tests' own clients.
var apiTransport = apiValidator.Transport(http.DefaultTransport)

// apiClient is the tests' HTTP client: every exchange validated, and none
// waits more than a minute, so a node that stops answering fails the test
// instead of hanging it.
var apiClient = &http.Client{Transport: apiTransport, Timeout: time.Minute}

func TestMain(m *testing.M) { apiValidator.Main(m, apiTransport, "cmd/sluice/e2e") }
