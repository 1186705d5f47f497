-- Redirect rules of a link (shorten.Rule as compact JSON; NULL: none),
-- read with the link into every cache, and the rule that picked each
-- click's target ('' for a link without rules, 'default' when none
-- matched).
ALTER TABLE links ADD COLUMN rules TEXT;
ALTER TABLE link_clicks ADD COLUMN target TEXT NOT NULL DEFAULT '';
