package storage

import (
	"fmt"
	"time"
)

// What a store assigns to a record it creates, the same on every backend:
// an id unless one was given, and the creation time (now, as stores keep
// times). Each returns ErrNotFound when an id, given or of a parent, breaks
// the id rules: such an id addresses nothing.

// assignID gives *id a new id when it has none and checks it and the
// parents' ids.
func assignID(id *string, parents ...string) error {
	if *id == "" {
		*id = NewID()
	}
	if !ValidID(*id) || !ValidIDs(parents...) {
		return ErrNotFound
	}
	return nil
}

// PrepareCreate readies a new partner.
func (p *Partner) PrepareCreate(now time.Time) error {
	if err := assignID(&p.ID); err != nil {
		return err
	}
	p.CreatedAt = Timestamp(now)
	return nil
}

// PrepareCreate readies a new organization of its partner.
func (o *Organization) PrepareCreate(now time.Time) error {
	if err := assignID(&o.ID, o.PartnerID); err != nil {
		return err
	}
	o.CreatedAt = Timestamp(now)
	return nil
}

// PrepareCreate readies a new user of its organization.
func (u *User) PrepareCreate(now time.Time) error {
	if err := assignID(&u.ID, u.OrgID); err != nil {
		return err
	}
	u.CreatedAt = Timestamp(now)
	u.UpdatedAt = u.CreatedAt
	return nil
}

// PrepareCreate readies a new patient of its user.
func (p *Patient) PrepareCreate(now time.Time) error {
	if err := assignID(&p.ID, p.OrgID, p.UserID); err != nil {
		return err
	}
	p.CreatedAt = Timestamp(now)
	p.UpdatedAt = p.CreatedAt
	return nil
}

// PrepareCreate readies a new webhook endpoint of its partner: an unset
// signature scheme becomes SchemeRxgate; an unknown one is refused (the
// HTTP layer checks it first).
func (e *WebhookEndpoint) PrepareCreate(now time.Time) error {
	if !ValidScheme(e.SignatureScheme) {
		return fmt.Errorf("unknown signature scheme %q", e.SignatureScheme)
	}
	if err := assignID(&e.ID, e.PartnerID); err != nil {
		return err
	}
	e.SignatureScheme = e.Scheme()
	e.CreatedAt = Timestamp(now)
	return nil
}

// PrepareCreate readies a new custom drug: an id unless given; its
// organization's id and, for a user-level drug, its user's must be valid.
func (d *CustomDrug) PrepareCreate() error {
	var parents []string
	if d.UserID != "" {
		parents = append(parents, d.UserID)
	}
	return assignID(&d.ID, append(parents, d.OrgID)...)
}

// PrepareCreate readies a new operator key.
func (k *OperatorKey) PrepareCreate(now time.Time) error {
	if err := assignID(&k.ID); err != nil {
		return err
	}
	k.CreatedAt = Timestamp(now)
	k.RevokedAt = nil
	return nil
}
