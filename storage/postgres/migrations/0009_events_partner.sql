-- A partner's events (issue 27): an operator key of role partner:<id>
-- lists its partner's events only, filtered in the query so that a page's
-- offset and hasNext count that partner's events alone. These read the
-- page by index, as events_org and events_status do for their filters.
CREATE INDEX events_partner ON events (partner_id, id);
CREATE INDEX events_partner_status ON events (partner_id, status, id);
