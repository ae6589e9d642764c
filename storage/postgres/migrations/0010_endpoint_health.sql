-- Endpoint health and auto-disable (issue 30, item 4). failing_since is
-- when the endpoint's current streak of failed attempts began (NULL after
-- a success), written with the outcomes that change it; disabled_at is
-- when it was disabled (NULL: enabled), and a claim skips its jobs. Every
-- endpoint stored before reads as enabled and healthy.
ALTER TABLE webhook_endpoints
    ADD COLUMN failing_since timestamptz,
    ADD COLUMN disabled_at timestamptz,
    ADD COLUMN disabled_reason text NOT NULL DEFAULT '';
