package badger

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/rxgate/rxgate/storage"
)

// Events. An event record holds the delivered bytes, the status and every
// attempt; three index keys (by organization, by status, by both) let the
// event log be filtered without a scan. The rules (payload, rounds,
// statuses) are the storage package's; this file stores their results.

type eventRecord struct {
	ID         string                `json:"id"`
	Type       string                `json:"type"`
	OrgID      string                `json:"org_id"`
	PartnerID  string                `json:"partner_id"`
	CreatedAt  time.Time             `json:"created_at"`
	Payload    []byte                `json:"payload"`
	Status     string                `json:"status"`
	SkipReason string                `json:"skip_reason,omitempty"`
	Round      int                   `json:"round"`
	Targets    []storage.EventTarget `json:"targets,omitempty"`
	Attempts   []storage.Attempt     `json:"attempts,omitempty"`
}

func fromEvent(e *storage.Event) eventRecord {
	return eventRecord{
		ID: e.ID, Type: e.Type, OrgID: e.OrganizationID, PartnerID: e.PartnerID, CreatedAt: e.CreatedAt,
		Payload: e.Payload, Status: e.Status, SkipReason: e.SkipReason, Round: e.Round,
		Targets: e.Targets, Attempts: e.Attempts,
	}
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
	}
	if oldStatus != ev.Status {
		if oldStatus != "" {
			if err := txn.delete(eventStatusKey(oldStatus, ev.ID)); err != nil {
				return err
			}
			if err := txn.delete(eventOrgStatusKey(ev.OrganizationID, oldStatus, ev.ID)); err != nil {
				return err
			}
		}
		if err := txn.set(eventStatusKey(ev.Status, ev.ID), nil); err != nil {
			return err
		}
		if err := txn.set(eventOrgStatusKey(ev.OrganizationID, ev.Status, ev.ID), nil); err != nil {
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
	return r.event(), nil
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
	byIndex := f.OrganizationID != "" || f.Status != ""
	var info storage.PageInfo
	err := s.view(ctx, func(txn *tx) (err error) {
		info, err = s.listPage(txn, storage.EventList(f), prefix, req, func(k, v []byte) error {
			var r eventRecord
			if !byIndex {
				if err := decode(v, &r); err != nil {
					return err
				}
			} else if err := getRecord(txn, eventKey(string(k[len(prefix):])), &r); err != nil {
				return err
			}
			out = append(out, r.event())
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
// has now (storage.Event.CheckReplay); attempts already made are kept.
func (s *Store) ReplayEvent(ctx context.Context, id string) (*storage.Event, error) {
	if !storage.ValidID(id) {
		return nil, fmt.Errorf("storage: replay event: %w", storage.ErrNotFound)
	}
	now := s.nowUTC()
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
		endpoints, err := partnerEndpointIDs(txn, ev.PartnerID)
		if err != nil {
			return err
		}
		old := ev.Status
		if err := ev.CheckReplay(org.ValidatedAt != nil, len(endpoints)); err != nil {
			return err
		}
		queued, err = s.startRound(txn, &ev, true, now, old)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("storage: replay event: %w", err)
	}
	s.jobsQueued(queued)
	return &ev, nil
}
