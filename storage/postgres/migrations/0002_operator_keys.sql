-- Named operator keys (issue 27): the operator listener's credentials, each
-- with a role. Only the SHA-256 of a key's secret is stored. A name stays
-- taken after its key is revoked, so that it names one key for good.

CREATE TABLE operator_keys (
    id          text COLLATE "C" PRIMARY KEY,
    name        text NOT NULL UNIQUE,
    role        text NOT NULL,
    secret_hash bytea NOT NULL, -- SHA-256 of the secret
    created_at  timestamptz NOT NULL,
    revoked_at  timestamptz     -- NULL while the key works
);
