package main

import (
	"errors"
	"flag"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/apperr"
)

// The exit codes of every command, for scripts to branch on.
const (
	exitOK      = 0 // success, or help asked for
	exitRefused = 1 // the answer is a refusal: over the limit, a 4xx from the server (but to check), no such record
	exitError   = 2 // usage, connection or server errors, and every other failure
)

// errUnhealthy marks a failed `sluice healthcheck`, which exits 1 whatever
// the cause: container runtimes read any other code as misuse (Docker
// reserves 2).
var errUnhealthy = errors.New("unhealthy")

// exitCode is the one place that turns a command's error into the process
// exit code, by the error's kind: a refusal is an answer the caller asked
// for and got (the server's 4xx, a refused check, a local record not
// found); anything else, from a bad flag to an unreachable server or its
// 5xx, is an error. `sluice check` is stricter (checkError): only a
// refused check exits 1; any error answer there exits 2.
func exitCode(err error) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.Is(err, errRefused), errors.Is(err, errUnhealthy):
		return exitRefused
	}
	if _, ok := errors.AsType[*checkError](err); ok {
		return exitError
	}
	if e, ok := errors.AsType[*client.Error](err); ok {
		if e.Status >= 400 && e.Status < 500 {
			return exitRefused
		}
		return exitError
	}
	if e, ok := errors.AsType[*apperr.Error](err); ok {
		switch e.Code {
		case apperr.NotFound, apperr.Conflict, apperr.Gone, apperr.Forbidden, apperr.Unauthorized:
			return exitRefused
		}
	}
	return exitError
}
