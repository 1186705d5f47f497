-- The built-in outbox's message moves into the delivery it was sent for.
-- The worker stores an outbox entry only with a sent outcome, so a
-- delivery has at most one, and the outcome rewrites the delivery's row
-- anyway: written there, the entry costs no b-tree of its own (a third of
-- what a notification wrote to the WAL), only the small index that lists
-- the outbox newest first. outbox_at is NULL when the delivery has none.
ALTER TABLE deliveries ADD COLUMN outbox_attempt BIGINT;
ALTER TABLE deliveries ADD COLUMN outbox_to TEXT;
ALTER TABLE deliveries ADD COLUMN outbox_subject TEXT;
ALTER TABLE deliveries ADD COLUMN outbox_body TEXT;
ALTER TABLE deliveries ADD COLUMN outbox_html TEXT;
ALTER TABLE deliveries ADD COLUMN outbox_at BIGINT;

-- Each delivery keeps its latest entry (earlier versions could store one
-- per attempt; only a sent attempt's ever had one).
UPDATE deliveries SET (outbox_attempt, outbox_to, outbox_subject, outbox_body, outbox_html, outbox_at) = (
    SELECT o.attempt, o.recipient, o.subject, o.body, o.html, o.created_at FROM outbox o
    WHERE o.notification_id = deliveries.notification_id AND o.channel = deliveries.channel
    ORDER BY o.attempt DESC LIMIT 1)
WHERE EXISTS (SELECT 1 FROM outbox o WHERE o.notification_id = deliveries.notification_id AND o.channel = deliveries.channel);

DROP TABLE outbox;

CREATE INDEX deliveries_outbox ON deliveries (outbox_at, notification_id, channel) WHERE outbox_at IS NOT NULL;
