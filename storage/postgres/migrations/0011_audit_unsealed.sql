-- Audit entries written with a change, not yet chained (issue 28). A
-- change's transaction inserts its entry here, a row of its own, instead
-- of chaining it after audit_head, whose lock it would hold through its
-- commit and WAL flush: every audited create took turns on that one row.
-- A sealer (audit.go, seal) moves the committed rows into audit_entries,
-- chained in id order, under the head's lock, many in one transaction.
-- Expand only: a build older than this one chains at once, as before, and
-- its entries and the sealer's share the head's lock.
CREATE TABLE audit_unsealed (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
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
    outcome       integer NOT NULL
);
