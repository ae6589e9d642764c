-- Standard Webhooks as an opt-in signature scheme per endpoint (issue 30,
-- item 5). Every endpoint stored before keeps the spec's own scheme.
ALTER TABLE webhook_endpoints
    ADD COLUMN signature_scheme text COLLATE "C" NOT NULL DEFAULT 'rxgate'
    CHECK (signature_scheme IN ('rxgate', 'standard'));
