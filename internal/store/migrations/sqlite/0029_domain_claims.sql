-- Custom domain verification (docs/links.md "Custom domains"). A domain may
-- be claimed by several owners at once while none has proved control: one
-- row per (domain, owner), each with its own token for the TXT record
-- _sluice.<domain>. The first claim verified wins (verified_at set) and the
-- others are dropped; a verified domain is one row, which the partial
-- unique index keeps so. Domains registered before verification existed
-- were already serving: they count as verified since their registration.
CREATE TABLE domains_new (
    domain       TEXT NOT NULL, -- lowercase ASCII (IDNA A-labels), no port
    owner        TEXT NOT NULL, -- API key id; '' for keyless loopback clients
    fallback_url TEXT NOT NULL DEFAULT '', -- where unknown codes on it go; '' answers 404
    created_at   INTEGER NOT NULL, -- Unix microseconds, UTC
    token        TEXT NOT NULL, -- what the TXT record _sluice.<domain> must hold
    verified_at  INTEGER, -- Unix microseconds, UTC; NULL while unverified
    PRIMARY KEY (domain, owner)
) STRICT, WITHOUT ROWID;

INSERT INTO domains_new (domain, owner, fallback_url, created_at, token, verified_at)
SELECT domain, owner, fallback_url, created_at, lower(hex(randomblob(20))), created_at FROM domains;

DROP TABLE domains;
ALTER TABLE domains_new RENAME TO domains;

CREATE UNIQUE INDEX domains_verified ON domains (domain) WHERE verified_at IS NOT NULL;
CREATE INDEX domains_owner ON domains (owner);
