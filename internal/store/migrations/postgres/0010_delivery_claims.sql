-- A worker claims a delivery (status sending) before it calls the provider,
-- so a redelivered copy of the job, on any node, waits instead of calling
-- it again. claim_owner names the attempt holding the claim; claim_until is
-- when the claim lapses (a crashed worker's delivery is then taken over by
-- the next copy of its job, or republished by the recovery sweep).
ALTER TABLE deliveries ADD COLUMN claim_owner TEXT NOT NULL DEFAULT '';
ALTER TABLE deliveries ADD COLUMN claim_until BIGINT;

CREATE INDEX deliveries_claims ON deliveries (channel, category, claim_until) WHERE status = 'sending';
