// Package audience sends one notification to every member of an audience:
// topics (users subscribed by key) and broadcasts to them, at a time or at
// a local time in each member's own timezone.
//
// # Topics
//
// A topic is a key and the users subscribed to it; subscribing is
// idempotent. The number of topics and of subscriptions a node keeps is
// bounded (Options.MaxTopics, Options.MaxSubscriptions).
//
// # Broadcasts
//
// A broadcast names an audience (To) and a notification (type, data,
// channels). Its members are read from an audience source by cursor, in
// user id order: a topic today; a segment is a second source with the same
// shape (members after a cursor), which is why To holds either.
//
// Members are split into groups, one per timezone for a local-time send
// ({"local": "09:00", "date": "2026-12-24"}), one group otherwise. Each
// group has its due time and its own cursor: the last user id it sent.
// Every node runs a Sender. It claims a due broadcast with a lease (a
// conditional write that moves the broadcast's due time to the lease's
// end, so one node holds it), streams the due groups' members in batches,
// sends each member one notification through notify with the request id
// bc:<broadcast id>:<user id>, and checkpoints the group's cursor and the
// counts after each batch (a write that holds only while the claim does).
// A node that dies mid-batch lets its lease lapse; another node claims the
// broadcast and resumes at the checkpoint, resending the batch that was in
// flight, whose request ids make the resent members' notifications
// duplicates, answered and not sent again. So no member is lost or sent
// twice.
//
// A local-time broadcast is planned at its first claim: the members'
// timezones (from their notification settings) are read once and one
// group is made per timezone, due at the local time on that date there (a
// time already past is due now). A group sends the members whose timezone
// is its own at the time it sends; a member whose timezone has no group
// (it changed after planning) is sent with the last group.
//
// Cancel stops a broadcast between batches: members not yet sent get
// nothing; the batch in flight when it is canceled completes.
package audience
