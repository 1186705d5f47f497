-- Custom domain verification (docs/links.md "Custom domains"). A domain may
-- be claimed by several owners at once while none has proved control: one
-- row per (domain, owner), each with its own token for the TXT record
-- _sluice.<domain>. The first claim verified wins (verified_at set) and the
-- others are dropped; a verified domain is one row, which the partial
-- unique index keeps so. Domains registered before verification existed
-- were already serving: they count as verified since their registration.
ALTER TABLE domains DROP CONSTRAINT domains_pkey;
ALTER TABLE domains ADD PRIMARY KEY (domain, owner);
ALTER TABLE domains ADD COLUMN token TEXT NOT NULL DEFAULT ''; -- what the TXT record _sluice.<domain> must hold
ALTER TABLE domains ADD COLUMN verified_at BIGINT; -- Unix microseconds, UTC; NULL while unverified
UPDATE domains SET token = replace(gen_random_uuid()::text, '-', '') || substr(md5(random()::text), 1, 8),
                   verified_at = created_at;
ALTER TABLE domains ALTER COLUMN token DROP DEFAULT;

CREATE UNIQUE INDEX domains_verified ON domains (domain) WHERE verified_at IS NOT NULL;
CREATE INDEX domains_owner ON domains (owner);
