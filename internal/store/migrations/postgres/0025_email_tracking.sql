-- Tracked links and the open pixel of email messages: one row per
-- notification and URL ('' for the pixel), reached by its random token.
-- Human hits and bot hits (scanners, image proxies, hits right after
-- sending) are counted apart; first_at is the first human hit.
CREATE TABLE email_links (
    token TEXT PRIMARY KEY,
    notification_id TEXT NOT NULL REFERENCES notifications (id) ON DELETE CASCADE,
    url TEXT NOT NULL,
    sent_at BIGINT NOT NULL, -- last handed to the provider: the bot window starts here
    hits BIGINT NOT NULL DEFAULT 0,
    bot_hits BIGINT NOT NULL DEFAULT 0,
    first_at BIGINT,
    last_bot_reason TEXT NOT NULL DEFAULT ''
);
CREATE UNIQUE INDEX email_links_notification_url ON email_links (notification_id, url);

-- The built-in outbox keeps an email's HTML part beside its text.
ALTER TABLE outbox ADD COLUMN html TEXT NOT NULL DEFAULT '';
