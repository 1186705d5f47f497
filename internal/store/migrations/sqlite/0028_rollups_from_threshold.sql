-- A link's hourly rollups are written once it has had RollUpAt hits
-- (store/linkrollups.go): below that, its stats read its few raw clicks,
-- and a click on a link opened once or twice (one sent by SMS or email)
-- writes its row alone instead of seven rollup rows beside it. rolled_up
-- is 1 when the rollups count every click recorded for the link, 0 while
-- they count only the clicks the retention purge removed. Links stored so
-- far have complete rollups; new links are inserted with 0.
ALTER TABLE links ADD COLUMN rolled_up INTEGER NOT NULL DEFAULT 1;
