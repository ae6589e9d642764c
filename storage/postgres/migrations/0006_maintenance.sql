-- Storage settings of the two tables that churn (issue 28, item 5).
-- Expand only: older builds run against it unchanged (no min-compat).
-- ALTER TABLE ... SET (storage parameters) takes a SHARE UPDATE EXCLUSIVE
-- lock: reads and writes go on while it runs. A new fillfactor applies to
-- pages written from now on.
--
-- jobs is a queue: a row is inserted, leased, renewed, rescheduled and
-- deleted within minutes, so the table stays small while its dead rows
-- pile up. Room on each page (fillfactor 70) lets the updates that touch
-- no indexed column (a lease's renewal) stay on their page as HOT
-- updates; vacuum runs after a fixed number of dead rows rather than a
-- share of a table that is mostly dead, and without cost delay, as a
-- pass over a small table is short; statistics follow its size closely,
-- so that the claim's plan stays on the pending index.
ALTER TABLE jobs SET (
    fillfactor = 70,
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_cost_delay = 0,
    autovacuum_analyze_scale_factor = 0,
    autovacuum_analyze_threshold = 1000
);

-- events grows by every create, is updated a few times as its deliveries
-- go (status, targets, attempts), then stays until the retention purge
-- deletes it, oldest first. Room on each page (fillfactor 85) keeps the
-- updates that leave status alone on their page; vacuum and analyze run
-- after a small share of the table changed, inserts included, so that
-- the visibility map stays current for index-only scans and the purged
-- space is reused.
ALTER TABLE events SET (
    fillfactor = 85,
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_insert_scale_factor = 0.05,
    autovacuum_analyze_scale_factor = 0.02
);
