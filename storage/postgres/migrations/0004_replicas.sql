-- Replica identity (issue 28, item 4). A lease records, beside its owner
-- (a queue, random per process), the replica id of the process that took
-- it, so that a process restarted under the same id can tell its dead
-- predecessor's leases from other replicas' live ones and take them back
-- at once. NULL for a lease taken by a store opened without an id (tests,
-- tools) and for every job not leased.
ALTER TABLE jobs ADD COLUMN replica_id text COLLATE "C";

-- One row per replica id in use: the process holding it, the database
-- session it keeps open for its life (a process that dies closes it), and
-- its heartbeat on the database's clock. A process starting under an id
-- whose holder is alive is refused (see replica.go).
CREATE TABLE replicas (
    replica_id    text COLLATE "C" PRIMARY KEY,
    process_id    text COLLATE "C" NOT NULL,
    backend_pid   integer NOT NULL,
    backend_start timestamptz,
    started_at    timestamptz NOT NULL,
    last_seen     timestamptz NOT NULL
);
