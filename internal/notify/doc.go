// Package notify is Sluice's notification service: the domain of
// notifications, deliveries, user settings, templates and dead letters, and
// the pipeline that moves a notification from an accepted request to a
// provider call.
//
// # Pipeline
//
// [Service.Send] validates a request, checks its request_id (a fast [Dedupe]
// in front of the store's unique constraint), decides each channel's fate
// from the user's [Settings] (muted channels and categories are recorded as
// suppressed), saves the notification and its deliveries through the
// [Store] (group-committed with other requests) and only then hands one
// [Job] per live delivery to the [Queue]. The 202 follows the save; a crash
// between the save and the publish is repaired by the recovery sweep
// ([Service.Recover], run by [Service.RunScheduler]), so the worst case is a
// duplicate, never a silent loss.
//
// [Service.Process] handles one job: it re-reads the delivery's state (a
// redelivered job whose delivery already went out is dropped), expires
// stale messages, renders the template, runs the [Rewriter] steps, calls
// the channel's [Provider] and records the outcome. Temporary failures are
// retried with exponential backoff and full jitter under the category's
// [RetryRule]; exhausted critical and orders deliveries become dead letters,
// marketing ones are dropped.
//
// # Digests
//
// A type whose template has a DigestRule is not sent event by event on a
// channel: each accepted notification's live delivery is saved suppressed
// with reason digested, and the notification joins its user's open digest
// for that channel and type, in the same transaction
// ([DigestStore.CreateDigested]). The first event of a window opens the
// digest (the store's unique index lets exactly one open, on any number of
// nodes), later ones append to it. When the window ends, or the digest
// fills up, the scheduler ([Service.SendDueDigests]) closes it and saves one
// notification of the same type on that channel, with request_id
// "digest:<digest id>", whose data is the first event's data plus count (the
// number of events) and items (one line per event): from there it is an
// ordinary notification (settings, quiet hours, queues, retries, receipts,
// escalation). Closing, saving and marking the digest sent are each
// idempotent, so a node that dies anywhere in between leaves the next one
// to finish, and exactly one message goes out.
//
// # Escalation
//
// A type whose template has an EscalationRule sends its other channels
// first. Each channel of the rule's To is saved, with the notification, as
// a delivery delayed until After has passed (later still if quiet hours
// last longer), its Error naming the conditions it waits on
// ("escalation: unless delivered,clicked,read"). The timer is therefore
// the scheduler's durable one (Store.DueDeliveries, on every node) and
// survives any restart. When it is due, the worker checks the conditions
// in the store before the first attempt: a delivered receipt on another
// channel, a person's click on one of the notification's tracked links
// (SMS or email), a person's open of its email, the inbox's read mark.
// If one holds the delivery ends suppressed with reason
// "engaged: <condition>" and nothing is sent; otherwise it is sent like
// any delivery, once (the delivery's claim and conditional writes
// make two nodes firing the same timer send it once).
//
// # Email tracking
//
// With EmailTracking.TrackLinks (or a type's Template.TrackLinks) the
// email rewriter replaces each distinct http(s) link of an email's text
// and HTML parts by a tracked link, BaseURL + "/e/" + token, one per
// notification and URL (a retry reuses them); with TrackOpens it adds an
// open pixel, a tracked link without a URL, to the HTML part. A hit
// (Service.EmailHit) is a person's click or open unless it is a bot's:
// a known scanner's or preview's user agent (ClassifyAgent), an address
// in a scanner or proxy network (BotNetworks), or a hit within BotWindow
// of the message being handed to its provider (mail gateways open every
// link of a message as it arrives). Bot hits are counted apart and never
// set clicked_at or opened_at, emit an event or end an escalation.
//
// # Layering
//
// This is a domain package: it must not import infrastructure (Prometheus,
// database drivers, Redis or NATS clients; cmd/sluice's
// TestDomainImportsNoInfrastructure checks it). The record store, the
// queue, the Redis fast path and the providers are adapters in other
// packages, implementing the interfaces declared here ([Store], [Queue],
// [Dedupe], [Provider]).
package notify
