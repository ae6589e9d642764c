-- Claim slots (issue 28, item 2). One row per endpoint that has had jobs:
-- a claim locks the rows of the endpoints it serves, FOR UPDATE SKIP
-- LOCKED, instead of one lock for the whole schema. The row is the
-- endpoint's claim lock: the claims of one endpoint take turns, so each
-- counts the leases the one before it committed and the per-endpoint
-- limit holds across replicas, while the claims of other endpoints go on
-- beside it. Rows are written when jobs are (insertJobs, Import) and
-- never changed by a claim, which only locks them; an endpoint deleted
-- keeps its row (a few bytes) for the jobs it may still have.
CREATE TABLE claim_slots (
    endpoint_id text COLLATE "C" PRIMARY KEY
);
INSERT INTO claim_slots (endpoint_id) SELECT DISTINCT endpoint_id FROM jobs ORDER BY 1;
