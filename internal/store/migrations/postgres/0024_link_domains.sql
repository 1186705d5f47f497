-- Custom short domains (docs/links.md "Custom domains"). A link may belong
-- to a registered domain ('' for none: it answers on every host not
-- registered as a domain), and its code is unique per domain, so the same
-- slug on two domains is two links.
CREATE TABLE domains (
    domain       TEXT PRIMARY KEY, -- lowercase ASCII (IDNA A-labels), no port
    owner        TEXT NOT NULL, -- API key id; '' for keyless loopback clients
    fallback_url TEXT NOT NULL DEFAULT '', -- where unknown codes on it go; '' answers 404
    created_at   BIGINT NOT NULL -- Unix microseconds, UTC
);

ALTER TABLE links ADD COLUMN domain TEXT NOT NULL DEFAULT '';
CREATE UNIQUE INDEX links_domain_code ON links (domain, code);
ALTER TABLE links DROP CONSTRAINT links_code_key;
CREATE INDEX links_owner_domain_id ON links (owner, domain, id);
