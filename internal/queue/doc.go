// Package queue gives Sluice its NATS JetStream connection, embedded in the
// process or external, with the same code above the connection, and on it
// the notification pipeline's job queue ([Conn.NotifyQueue], a
// notify.Queue): it is the notify domain's queue adapter.
//
// [Open] with an empty Options.URL starts a NATS server inside the process,
// with JetStream storing its files under <DataDir>/jetstream and, unless
// Options.ListenAddr is set, no TCP listener at all: the client talks to it
// through an in-process pipe. With Options.URL set, Open connects to an
// external NATS server (or cluster) that has JetStream enabled and keeps
// reconnecting for as long as the [Conn] is open. Either way callers get a
// *nats.Conn and a jetstream.JetStream and never need to know which one they
// have; [Conn.Embedded] says, for logs and diagnostics only.
//
// # Naming streams and subjects
//
// Every stream name and every subject that code in Sluice creates goes through
// [Conn.Name], which prepends Options.StreamPrefix. Production leaves the
// prefix empty. Tests that share one external NATS server set a prefix unique
// to the test (for example "T" + a random suffix + "_"), so parallel tests,
// and parallel CI jobs, never see each other's streams. Names follow one
// convention so that one prefix serves both:
//
//   - stream names are upper case words joined by '_':
//     c.Name("NOTIFY_EMAIL_HIGH");
//   - subjects are lower case tokens joined by '.', the first token naming
//     the owner: c.Name("notify.email.high").
//
// A prefix may hold only ASCII letters, digits, '_' and '-', which are valid
// both in stream names and inside a subject's first token. A test deletes its
// own streams in t.Cleanup and never anybody else's.
//
// # Sharing partitions out
//
// With pinned partition consumers alone, the
// server pins each partition to whichever node pulls first, so one node
// usually held every partition of a stream while the others idled. So the
// nodes running a queue also know each other (presence.go: a heartbeat on
// core NATS, a goodbye on shutdown), and each pulls only the partitions
// that owner (presence.go) assigns to it in the sorted list of live nodes:
// a stream's partitions go round the nodes, at most
// ceil(partitions/nodes) each.
//
// When the nodes change, a node stops pulling a partition no longer its
// own, lets the jobs it holds of it finish (it keeps those alive and the
// pin stays with it meanwhile), and only then unpins it: the new owner,
// already pulling, is pinned next. A user's jobs therefore never run on
// two nodes at once, and their order holds across the move, as it does
// across a shutdown (as there, a job still running pinnedTTL after its
// partition stopped pulling loses the pin for it). Nodes that disagree
// for a moment on the list cost a pause, not the order: two nodes
// pulling one partition are still served one at a time by the pin, and
// a partition nobody pulls waits until the lists agree again (within
// presenceTimeout). A node alone holds every partition.
//
// A node that died (killed, its host lost) says no goodbye: the others
// presume it dead once they have not heard it for presenceTimeout, and the
// new owner of each of its partitions pulls it. The server, though, keeps
// the partition pinned to the dead node's client until pinnedTTL without
// pulls, 15 s in which an OTP would wait; so the new owner unpins it at
// once (see watchPin), and the server pins the new owner's pull next. This
// cannot put one user's jobs on two live nodes: the pin is the dead
// node's, which runs nothing. The jobs it held come back when their ack
// wait lapses (3 s for critical streams) and their delivery claims lapse
// (notify.Options.ClaimLease), the notify service's claim keeping a
// delivery from being sent twice unless the dead node's call may have
// reached the provider. The price is for a node presumed dead that was
// alive (cut off from NATS for presenceTimeout while a job ran): that
// user's next job may then run beside it.
//
// # Settling a partition
//
// When a node starts pulling a pinned partition,
// jobs of it may still be out to another node: one that died or froze
// holding them (they come back when their ack wait lapses), or one that
// handed the partition over while the server was sending it a job its
// subscription no longer read (that job, too, comes back only after the
// ack wait). The server meanwhile sends this node the partition's later
// jobs; run at once, a user's later job would go before the earlier one.
// So the jobs of a partition just taken are held, not run, until the
// consumer shows no job out but the ones this node holds; then they run
// in stream order, the redelivered earlier jobs first. A partition handed
// over in an orderly way has nothing out and settles at the first look
// (one consumer info request). The wait is bounded by the consumer's ack
// wait plus settleSlack, after which the held jobs run anyway.
package queue
