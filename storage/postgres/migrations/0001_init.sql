-- rxgate's schema. Ids and sort keys are text in the "C" collation, so
-- that they sort by bytes, as the embedded store's keys do, whatever the
-- database's locale. Bytes that are signed or served (event payloads,
-- stored API objects) are bytea: jsonb would reorder their members.

CREATE TABLE meta (
    name  text COLLATE "C" PRIMARY KEY,
    value bytea NOT NULL
);

CREATE TABLE partners (
    id          text COLLATE "C" PRIMARY KEY,
    name        text NOT NULL,
    secret_hash bytea, -- SHA-256 of the secret
    created_at  timestamptz NOT NULL
);

CREATE TABLE organizations (
    id             text COLLATE "C" PRIMARY KEY,
    partner_id     text COLLATE "C" NOT NULL REFERENCES partners (id),
    name           text NOT NULL,
    allowed_scopes text[], -- NULL: none given
    secret_hash    bytea,
    validated_at   timestamptz,
    created_at     timestamptz NOT NULL
);
CREATE INDEX organizations_partner ON organizations (partner_id);

CREATE TABLE users (
    org_id      text COLLATE "C" NOT NULL REFERENCES organizations (id),
    id          text COLLATE "C" NOT NULL,
    email       text NOT NULL,
    email_key   text COLLATE "C" NOT NULL, -- lower(email): unique per organization, ignoring case
    given_name  text NOT NULL,
    family_name text NOT NULL,
    title       text NOT NULL,
    role        text NOT NULL,
    disabled    boolean NOT NULL,
    disabled_at timestamptz,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,
    PRIMARY KEY (org_id, id),
    UNIQUE (org_id, email_key)
);

CREATE TABLE patients (
    org_id             text COLLATE "C" NOT NULL,
    user_id            text COLLATE "C" NOT NULL,
    id                 text COLLATE "C" NOT NULL,
    partner_patient_id text COLLATE "C", -- NULL when not set
    record             bytea NOT NULL,   -- the spec 2.3 members and verifications, as JSON
    created_at         timestamptz NOT NULL,
    updated_at         timestamptz NOT NULL,
    PRIMARY KEY (org_id, user_id, id),
    FOREIGN KEY (org_id, user_id) REFERENCES users (org_id, id),
    UNIQUE (org_id, partner_patient_id)
);

CREATE TABLE prescriptions (
    org_id     text COLLATE "C" NOT NULL,
    user_id    text COLLATE "C" NOT NULL,
    patient_id text COLLATE "C" NOT NULL,
    scid       text COLLATE "C" NOT NULL,
    -- storage.PrescriptionPosition: the list's sort key, newest first.
    position   text COLLATE "C" NOT NULL,
    created_at timestamptz NOT NULL,
    record     bytea NOT NULL, -- the spec 2.5 object as served
    PRIMARY KEY (org_id, scid),
    FOREIGN KEY (org_id, user_id, patient_id) REFERENCES patients (org_id, user_id, id),
    UNIQUE (org_id, user_id, patient_id, position)
);

CREATE TABLE custom_drugs (
    org_id  text COLLATE "C" NOT NULL REFERENCES organizations (id),
    user_id text COLLATE "C" NOT NULL, -- '' for an organization-level drug
    id      text COLLATE "C" NOT NULL,
    record  bytea NOT NULL, -- the spec 2.4 object as served
    PRIMARY KEY (org_id, user_id, id)
);

CREATE TABLE webhook_endpoints (
    id              text COLLATE "C" PRIMARY KEY,
    partner_id      text COLLATE "C" NOT NULL REFERENCES partners (id),
    url             text NOT NULL,
    secret          text NOT NULL,
    previous_secret text NOT NULL,
    previous_until  timestamptz,
    created_at      timestamptz NOT NULL,
    rotated_at      timestamptz,
    UNIQUE (partner_id, url)
);

CREATE TABLE events (
    id          text COLLATE "C" PRIMARY KEY, -- version-7 uuid: oldest first
    type        text NOT NULL,
    org_id      text COLLATE "C" NOT NULL REFERENCES organizations (id),
    partner_id  text COLLATE "C" NOT NULL,
    created_at  timestamptz NOT NULL,
    payload     bytea NOT NULL, -- the exact body delivered
    status      text COLLATE "C" NOT NULL,
    skip_reason text NOT NULL,
    round       integer NOT NULL,
    targets     bytea NOT NULL, -- JSON array of storage.EventTarget
    attempts    bytea NOT NULL  -- JSON array of storage.Attempt
);
CREATE INDEX events_org ON events (org_id, id);
CREATE INDEX events_status ON events (status, id);
CREATE INDEX events_org_status ON events (org_id, status, id);

-- The webhook outbox. A job is pending (lease_id NULL) or leased by one
-- owner until leased_until. endpoint_id has no foreign key: a job outlives
-- the deletion of its endpoint, and its attempt records that.
CREATE TABLE jobs (
    id           text COLLATE "C" PRIMARY KEY,
    event_id     text COLLATE "C" NOT NULL REFERENCES events (id) ON DELETE CASCADE,
    endpoint_id  text COLLATE "C" NOT NULL,
    round        integer NOT NULL,
    attempts     integer NOT NULL,
    due          timestamptz NOT NULL,
    owner        text NOT NULL,
    lease_id     text COLLATE "C",
    leased_until timestamptz
);
CREATE INDEX jobs_pending ON jobs (endpoint_id, due, id) WHERE lease_id IS NULL;
CREATE INDEX jobs_leased ON jobs (endpoint_id) WHERE lease_id IS NOT NULL;
CREATE INDEX jobs_event ON jobs (event_id);
