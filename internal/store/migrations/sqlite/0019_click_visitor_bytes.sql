-- The visitor hash of a click as its 16 bytes instead of 32 hex digits
-- (docs/links.md "Storage"): new rows leave visitor empty and fill
-- visitor_id; rows written before keep their text in visitor and a NULL
-- visitor_id, and reads take whichever is set. Adding a column rewrites
-- no row, so the migration is instant however many clicks are stored.
ALTER TABLE link_clicks ADD COLUMN visitor_id BLOB;
