-- The audit trail (issue 27): a hash chain of entries, each committing to
-- the one before (storage.AuditHash), and checkpoints signed by a key the
-- database does not hold. audit_head is one row every append locks (FOR
-- UPDATE): that lock orders the chain, so seq is gap-free and each entry's
-- prev_hash is its predecessor's hash, however many replicas append.

CREATE TABLE audit_head (
    id   integer PRIMARY KEY CHECK (id = 1),
    seq  bigint NOT NULL,
    hash bytea NOT NULL
);
INSERT INTO audit_head (id, seq, hash) VALUES (1, 0, '');

CREATE TABLE audit_entries (
    seq           bigint PRIMARY KEY,
    at            timestamptz NOT NULL,
    actor_kind    text NOT NULL,
    partner_id    text COLLATE "C" NOT NULL,
    org_id        text COLLATE "C" NOT NULL,
    user_id       text COLLATE "C" NOT NULL,
    operator_name text NOT NULL,
    operator_role text NOT NULL,
    operation     text NOT NULL,
    patient_id    text COLLATE "C" NOT NULL,
    resource      text NOT NULL,
    request_id    text NOT NULL,
    outcome       integer NOT NULL,
    prev_hash     bytea NOT NULL,
    hash          bytea NOT NULL
);
-- "Who saw this patient?" and "what did this user do?" read by index.
CREATE INDEX audit_entries_patient ON audit_entries (patient_id, seq) WHERE patient_id <> '';
CREATE INDEX audit_entries_user ON audit_entries (user_id, seq) WHERE user_id <> '';
CREATE INDEX audit_entries_at ON audit_entries (at);

CREATE TABLE audit_checkpoints (
    seq       bigint PRIMARY KEY,
    hash      bytea NOT NULL,
    at        timestamptz NOT NULL,
    start     boolean NOT NULL,
    signature bytea NOT NULL
);
