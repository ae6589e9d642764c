package badger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	badgerdb "github.com/dgraph-io/badger/v4"

	"github.com/rxgate/rxgate/storage"
)

// Events. An event's delivered bytes are written once, at ep/{event} as
// they are (no JSON around them); its record at ev/{event} holds the status
// and every attempt, and is rewritten with each outcome, so the rewrite
// and a claim's read stay small. Three index keys (by organization, by
// status, by both) let the event log be filtered without a scan. The rules
// (payload, rounds, statuses) are the storage package's; this file stores
// their results.

type eventRecord struct {
	ID        string    `json:"id"`
	Type      string    `json:"type"`
	OrgID     string    `json:"org_id"`
	PartnerID string    `json:"partner_id"`
	CreatedAt time.Time `json:"created_at"`
	// Payload is set only in records of rxgate versions that kept the
	// payload in the record; Open moves it to its own key
	// (splitEventPayloads).
	Payload    []byte                `json:"payload,omitempty"`
	Status     string                `json:"status"`
	SkipReason string                `json:"skip_reason,omitempty"`
	Round      int                   `json:"round"`
	Targets    []storage.EventTarget `json:"targets,omitempty"`
	Attempts   []storage.Attempt     `json:"attempts,omitempty"`
}

// fromEvent is e's record; its payload is written apart (putPayload).
func fromEvent(e *storage.Event) eventRecord {
	return eventRecord{
		ID: e.ID, Type: e.Type, OrgID: e.OrganizationID, PartnerID: e.PartnerID, CreatedAt: e.CreatedAt,
		Status: e.Status, SkipReason: e.SkipReason, Round: e.Round,
		Targets: e.Targets, Attempts: e.Attempts,
	}
}

// payloadValue is how a payload is stored: the record version byte, then
// the bytes as delivered.
func payloadValue(payload []byte) []byte {
	return append([]byte{recordV1}, payload...)
}

// getPayload reads the payload of the event with id; nil when the event is
// gone.
func getPayload(txn *tx, id string) ([]byte, error) {
	var out []byte
	err := txn.value(eventPayloadKey(id), func(v []byte) error {
		if len(v) == 0 || v[0] != recordV1 {
			return fmt.Errorf("storage: decode event payload: unknown record version")
		}
		out = append([]byte(nil), v[1:]...)
		return nil
	})
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	return out, err
}

func (r *eventRecord) event() storage.Event {
	return storage.Event{
		ID: r.ID, Type: r.Type, OrganizationID: r.OrgID, PartnerID: r.PartnerID, CreatedAt: r.CreatedAt,
		Payload: r.Payload, Status: r.Status, SkipReason: r.SkipReason, Round: r.Round,
		Targets: slices.Clone(r.Targets), Attempts: slices.Clone(r.Attempts),
	}
}

// startRound starts ev's current round (storage.Event.StartRound) to every
// endpoint of its partner, due at now, and writes ev, its indexes and the
// round's jobs. oldStatus is ev's status before ("" for a new event).
func (s *Store) startRound(txn *tx, ev *storage.Event, validated bool, now time.Time, oldStatus string) ([]storage.Job, error) {
	var ids []string
	if validated {
		var err error
		if ids, err = partnerEndpointIDs(txn, ev.PartnerID); err != nil {
			return nil, err
		}
	}
	jobs := ev.StartRound(validated, ids, now)
	for i := range jobs {
		if err := putRecord(txn, jobPendingKey(jobs[i].EndpointID, jobs[i].Due, jobs[i].ID), fromJob(&jobs[i])); err != nil {
			return nil, err
		}
	}
	return jobs, putEvent(txn, ev, oldStatus)
}

// putEvent writes ev and moves its status indexes from oldStatus.
func putEvent(txn *tx, ev *storage.Event, oldStatus string) error {
	if oldStatus == "" {
		if err := txn.set(eventOrgKey(ev.OrganizationID, ev.ID), nil); err != nil {
			return err
		}
		if err := txn.set(eventPartnerKey(ev.PartnerID, ev.ID), nil); err != nil {
			return err
		}
	}
	if oldStatus != ev.Status {
		if oldStatus != "" {
			if err := txn.delete(eventStatusKey(oldStatus, ev.ID)); err != nil {
				return err
			}
			if err := txn.delete(eventOrgStatusKey(ev.OrganizationID, oldStatus, ev.ID)); err != nil {
				return err
			}
			if err := txn.delete(eventPartnerStatusKey(ev.PartnerID, oldStatus, ev.ID)); err != nil {
				return err
			}
		}
		if err := txn.set(eventStatusKey(ev.Status, ev.ID), nil); err != nil {
			return err
		}
		if err := txn.set(eventOrgStatusKey(ev.OrganizationID, ev.Status, ev.ID), nil); err != nil {
			return err
		}
		if err := txn.set(eventPartnerStatusKey(ev.PartnerID, ev.Status, ev.ID), nil); err != nil {
			return err
		}
	}
	return putRecord(txn, eventKey(ev.ID), fromEvent(ev))
}

// getEvent reads the event with id in txn.
func getEvent(txn *tx, id string) (storage.Event, error) {
	var r eventRecord
	if err := getRecord(txn, eventKey(id), &r); err != nil {
		return storage.Event{}, err
	}
	return withPayload(txn, &r)
}

// withPayload is the event of r, with its payload.
func withPayload(txn *tx, r *eventRecord) (storage.Event, error) {
	e := r.event()
	if e.Payload == nil {
		var err error
		if e.Payload, err = getPayload(txn, r.ID); err != nil {
			return storage.Event{}, err
		}
	}
	return e, nil
}

// GetEvent returns the event with id.
func (s *Store) GetEvent(ctx context.Context, id string) (*storage.Event, error) {
	if !storage.ValidID(id) {
		return nil, fmt.Errorf("storage: get event: %w", storage.ErrNotFound)
	}
	var e storage.Event
	err := s.view(ctx, func(txn *tx) (err error) {
		e, err = getEvent(txn, id)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("storage: get event: %w", err)
	}
	return &e, nil
}

// ListEvents returns one page of the events matching f, oldest first. The
// filters are served from indexes, so a page costs the same whatever the
// filter and however deep.
func (s *Store) ListEvents(ctx context.Context, f storage.EventFilter, req storage.PageRequest) ([]storage.Event, storage.PageInfo, error) {
	out := make([]storage.Event, 0, req.Limit)
	if !f.Matchable() {
		return out, storage.PageInfo{Limit: req.Limit}, nil
	}
	prefix := eventsPrefix(f.OrganizationID, f.Status)
	if f.PartnerID != "" && f.OrganizationID == "" {
		prefix = eventsPartnerPrefix(f.PartnerID, f.Status)
	}
	byIndex := f.OrganizationID != "" || f.Status != "" || f.PartnerID != ""
	info := storage.PageInfo{Limit: req.Limit}
	err := s.view(ctx, func(txn *tx) (err error) {
		if f.PartnerID != "" && f.OrganizationID != "" {
			// An organization's events are all its partner's: another
			// partner's organization lists nothing, as one that does not
			// exist does, without a scan.
			var org organizationRecord
			if err := getRecord(txn, organizationKey(f.OrganizationID), &org); err != nil || org.PartnerID != f.PartnerID {
				if errors.Is(err, storage.ErrNotFound) || err == nil {
					_, _, err = s.cursors.StartPage(storage.EventList(f), req)
				}
				return err
			}
		}
		info, err = s.listPage(txn, storage.EventList(f), prefix, req, func(k, v []byte) error {
			var r eventRecord
			if !byIndex {
				if err := decode(v, &r); err != nil {
					return err
				}
			} else if err := getRecord(txn, eventKey(string(k[len(prefix):])), &r); err != nil {
				return err
			}
			e, err := withPayload(txn, &r)
			if err != nil {
				return err
			}
			out = append(out, e)
			return nil
		})
		return err
	})
	if err != nil {
		return nil, storage.PageInfo{Limit: req.Limit}, fmt.Errorf("storage: list events: %w", err)
	}
	return out, info, nil
}

// ReplayEvent starts a new round of the event to every endpoint its partner
// has now, due now (storage.Event.CheckReplay); attempts already made are
// kept (storage.Store).
func (s *Store) ReplayEvent(ctx context.Context, id string) (*storage.Event, error) {
	return s.replayEvent(ctx, id, "", s.nowUTC())
}

// ReplayEventTo starts a new round of the event to one of its partner's
// endpoints, due at due (storage.Store).
func (s *Store) ReplayEventTo(ctx context.Context, id, endpointID string, due time.Time) (*storage.Event, error) {
	if !storage.ValidID(endpointID) {
		return nil, fmt.Errorf("storage: replay event: %w", storage.ErrNotFound)
	}
	return s.replayEvent(ctx, id, endpointID, due)
}

// replayEvent starts a new round of the event, due at due: to endpointID,
// which must be one of its partner's, or to every endpoint of its partner
// when endpointID is "".
func (s *Store) replayEvent(ctx context.Context, id, endpointID string, due time.Time) (*storage.Event, error) {
	if !storage.ValidID(id) {
		return nil, fmt.Errorf("storage: replay event: %w", storage.ErrNotFound)
	}
	var (
		ev     storage.Event
		queued []storage.Job
	)
	err := s.update(ctx, func(txn *tx) (err error) {
		if ev, err = getEvent(txn, id); err != nil {
			return err
		}
		var org organizationRecord
		if err := getRecord(txn, organizationKey(ev.OrganizationID), &org); err != nil {
			return fmt.Errorf("organization %w", err)
		}
		var endpoints []string
		if endpointID == "" {
			if endpoints, err = partnerEndpointIDs(txn, ev.PartnerID); err != nil {
				return err
			}
		} else if ok, err := exists(txn, partnerHookKey(ev.PartnerID, endpointID)); err != nil {
			return err
		} else if !ok {
			return fmt.Errorf("endpoint %w", storage.ErrNotFound)
		} else {
			endpoints = []string{endpointID}
		}
		old := ev.Status
		if err := ev.CheckReplay(org.ValidatedAt != nil, len(endpoints)); err != nil {
			return err
		}
		queued = ev.StartRound(true, endpoints, due)
		for i := range queued {
			if err := putRecord(txn, jobPendingKey(queued[i].EndpointID, queued[i].Due, queued[i].ID), fromJob(&queued[i])); err != nil {
				return err
			}
		}
		return putEvent(txn, &ev, old)
	})
	if err != nil {
		return nil, fmt.Errorf("storage: replay event: %w", err)
	}
	s.jobsQueued(queued)
	return &ev, nil
}

// splitEventPayloads moves the payloads that format 1 kept in event
// records to their own keys (format 2), in transactions of a few hundred
// events; an event already moved is skipped.
func (s *Store) splitEventPayloads(ctx context.Context) error {
	for after := ""; ; {
		var ids []string
		err := s.view(ctx, func(txn *tx) error {
			opts := badgerdb.DefaultIteratorOptions
			opts.Prefix = []byte(prefixEvent)
			it := txn.iterator(opts)
			defer it.Close()
			for it.Seek(eventKey(after + "\x00")); it.Valid() && len(ids) < 256; it.Next() {
				ids = append(ids, string(it.Item().Key()[len(prefixEvent):]))
			}
			return nil
		})
		if err != nil || len(ids) == 0 {
			if err != nil {
				return fmt.Errorf("storage: split event payloads: %w", err)
			}
			break
		}
		err = s.update(ctx, func(txn *tx) error {
			for _, id := range ids {
				var r eventRecord
				if err := getRecord(txn, eventKey(id), &r); err != nil {
					return err
				}
				if r.Payload == nil {
					continue
				}
				if err := txn.set(eventPayloadKey(id), payloadValue(r.Payload)); err != nil {
					return err
				}
				r.Payload = nil
				if err := putRecord(txn, eventKey(id), r); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("storage: split event payloads: %w", err)
		}
		after = ids[len(ids)-1]
		if s.afterMigrationBatch != nil {
			s.afterMigrationBatch()
		}
	}
	return nil
}

// indexEventPartners writes the partner indexes of every event (format
// 3), in transactions of a few hundred events; writing an index key that
// is there already changes nothing.
func (s *Store) indexEventPartners(ctx context.Context) error {
	for after := ""; ; {
		var recs []eventRecord
		err := s.view(ctx, func(txn *tx) error {
			opts := badgerdb.DefaultIteratorOptions
			opts.Prefix = []byte(prefixEvent)
			opts.PrefetchValues = false
			it := txn.iterator(opts)
			defer it.Close()
			for it.Seek(eventKey(after + "\x00")); it.Valid() && len(recs) < 256; it.Next() {
				var r eventRecord
				if err := it.Item().Value(func(v []byte) error { return decode(v, &r) }); err != nil {
					return err
				}
				id := string(it.Item().Key()[len(prefixEvent):])
				recs = append(recs, eventRecord{ID: id, PartnerID: r.PartnerID, Status: r.Status})
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("storage: index event partners: %w", err)
		}
		if len(recs) == 0 {
			return nil
		}
		err = s.update(ctx, func(txn *tx) error {
			for _, r := range recs {
				if err := txn.set(eventPartnerKey(r.PartnerID, r.ID), nil); err != nil {
					return err
				}
				if err := txn.set(eventPartnerStatusKey(r.PartnerID, r.Status, r.ID), nil); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("storage: index event partners: %w", err)
		}
		after = recs[len(recs)-1].ID
		if s.afterMigrationBatch != nil {
			s.afterMigrationBatch()
		}
	}
}

// CreateTestEvent writes a webhook.test event to the endpoint with its
// job (storage.Store). Its organization index keys carry an empty
// organization, which no organization's list reaches.
func (s *Store) CreateTestEvent(ctx context.Context, endpointID string) (*storage.Event, error) {
	if !storage.ValidID(endpointID) {
		return nil, fmt.Errorf("storage: create test event: %w", storage.ErrNotFound)
	}
	now := s.nowUTC()
	var (
		ev   *storage.Event
		jobs []storage.Job
	)
	err := s.update(ctx, func(txn *tx) error {
		var r endpointRecord
		if err := getRecord(txn, endpointKey(endpointID), &r); err != nil {
			return fmt.Errorf("webhook endpoint %w", err)
		}
		ep := r.endpoint()
		var err error
		if ev, jobs, err = storage.NewWebhookTest(&ep, now); err != nil {
			return err
		}
		for i := range jobs {
			if err := putRecord(txn, jobPendingKey(jobs[i].EndpointID, jobs[i].Due, jobs[i].ID), fromJob(&jobs[i])); err != nil {
				return err
			}
		}
		if err := txn.set(eventPayloadKey(ev.ID), payloadValue(ev.Payload)); err != nil {
			return err
		}
		return putEvent(txn, ev, "")
	})
	if err != nil {
		return nil, fmt.Errorf("storage: create test event: %w", err)
	}
	s.jobsQueued(jobs)
	return ev, nil
}
