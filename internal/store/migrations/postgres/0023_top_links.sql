-- The dashboard's top links (GET /v1/stats/links) read the first rows of
-- these indexes instead of sorting every link: with ten million links the
-- sort took seconds. The flusher's counter update keeps them current (one
-- index entry moved per clicked link per batch).
CREATE INDEX links_top ON links (clicks DESC, bot_hits DESC, id DESC);
CREATE INDEX links_owner_top ON links (owner, clicks DESC, bot_hits DESC, id DESC);
