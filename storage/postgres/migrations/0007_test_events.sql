-- Test sends (issue 30, item 3). A webhook.test event goes to one endpoint
-- and belongs to no organization: its org_id is NULL, which the event
-- log's organization filters never match.
ALTER TABLE events ALTER COLUMN org_id DROP NOT NULL;
