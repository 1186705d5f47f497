-- Provider receipts and failover (issue 6): the provider's id for the
-- message (Twilio SID, FCM name, apns-id, Message-ID) and, as a JSON array,
-- the providers tried by the last attempt when it did not end at the first
-- one ('' when it did).
ALTER TABLE deliveries ADD COLUMN provider_message_id TEXT NOT NULL DEFAULT '';
ALTER TABLE deliveries ADD COLUMN hops TEXT NOT NULL DEFAULT '';
