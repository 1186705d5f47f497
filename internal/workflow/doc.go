// Package workflow is the workflow engine: definitions of steps that
// events start and resume, run per user, durably.
//
// # The model
//
// A workflow (PutWorkflow) is a key, a trigger event, an optional entry
// rule (once_per) and a list of steps run in order unless one jumps:
// send (a notification through notify, with the run's data), wait (a
// duration, or the next local time of day in the user's time zone),
// wait_for (the user's next event of a name whose data matches, with an
// optional timeout and on_timeout step), branch (on the run's data or the
// user's attributes), split (random, by percents; "exit" makes a holdout)
// and exit. A definition is validated whole when it is saved: every bad
// field is named at once, and a loop that passes no wait or wait_for is
// refused. Each save is a new version; a run keeps the version it started
// on, so a change applies to new runs only. Parsed versions are cached by
// key and version, which never change.
//
// An event (Ingest) starts a run of every workflow it triggers and
// resumes its user's runs waiting for it whose match holds (the event's
// data joins the run's under the event's name); the event, the runs it
// starts (entry.once_per checked in the same transaction) and the runs it
// resumes are written at once, and a repeated request_id answers the
// first answer.
//
// # Runs live in the store
//
// A run is a row, never a node's memory: its position (the step to run,
// or the wait it is at), its data, its history of steps, when it is due,
// and a sequence number. Every node runs RunScheduler, which claims due
// runs (moving them out of the others' reach for a lease) and advances
// them; runs an event started or resumed are claimed and advanced at
// once by the node that took the event. A node that dies holding a claim
// leaves its runs due again when the lease ends.
//
// # Why a conditional write per step
//
// Each step's effect (the run's new position, status, data, history and
// due time) is written with UpdateRun, conditional on the sequence number
// read, after every step. So a crash re-runs at most the step in flight,
// and a send is idempotent on its request id ("wf:<run id>:<step index>"),
// so running it again sends nothing twice. And whoever moved the run
// meanwhile (a cancel, an event resuming it, another node whose claim
// took over) wins: the advance that loses its write stops. Each step runs
// at most once and no run is lost.
//
// A send that fails for a reason trying again may cure is retried with a
// growing pause; one refused for good (unknown type, invalid data) fails
// the run, as does a run executing more than MaxRunSteps steps, a guard
// beside validation's loop check.
//
// # Bounds
//
// What clients fill is bounded (caps.go, bounds.go, retention.go): live
// runs per user (MaxLiveRunsPerUser) and in the store (MaxLiveRuns,
// checked against a count read every CountEvery, never per event),
// workflows (MaxWorkflows) and their versions (MaxVersions), users with
// attributes (MaxAttributeUsers), an event's data (32 KiB of UTF-8
// nested at most MaxDataDepth) and a run's (MaxRunDataBytes). Events,
// the runs that ended and the versions no live run is on are purged
// Retention after they were taken, ended or replaced. A panic while a
// run advances fails that run, never the scheduler.
package workflow
