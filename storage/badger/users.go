package badger

import (
	"context"
	"fmt"

	"github.com/rxgate/rxgate/storage"
)

// CreateUser stores u in its organization (storage.Store). The e-mail is
// kept unique by an index key of its lower-case form.
func (s *Store) CreateUser(ctx context.Context, u *storage.User) error {
	if err := u.PrepareCreate(s.now()); err != nil {
		return fmt.Errorf("storage: create user: %w", err)
	}
	err := s.update(ctx, func(txn *tx) error {
		if ok, err := exists(txn, organizationKey(u.OrgID)); err != nil {
			return err
		} else if !ok {
			return fmt.Errorf("organization %w", storage.ErrNotFound)
		}
		for _, k := range [][]byte{userKey(u.OrgID, u.ID), userEmailKey(u.OrgID, u.Email)} {
			if ok, err := exists(txn, k); err != nil {
				return err
			} else if ok {
				return storage.ErrAlreadyExists
			}
		}
		if err := txn.set(userEmailKey(u.OrgID, u.Email), []byte(u.ID)); err != nil {
			return err
		}
		return putRecord(txn, userKey(u.OrgID, u.ID), fromUser(u))
	})
	if err != nil {
		return fmt.Errorf("storage: create user: %w", err)
	}
	return nil
}

// GetUser returns the user of the organization.
func (s *Store) GetUser(ctx context.Context, orgID, userID string) (*storage.User, error) {
	if !storage.ValidIDs(orgID, userID) {
		return nil, fmt.Errorf("storage: get user: %w", storage.ErrNotFound)
	}
	var r userRecord
	if err := s.view(ctx, func(txn *tx) error { return getRecord(txn, userKey(orgID, userID), &r) }); err != nil {
		return nil, fmt.Errorf("storage: get user: %w", err)
	}
	u := r.user()
	return &u, nil
}

// GetMember returns an organization and one of its users, read in one
// transaction: what authenticating a partner request needs.
func (s *Store) GetMember(ctx context.Context, orgID, userID string) (*storage.Organization, *storage.User, error) {
	if !storage.ValidIDs(orgID, userID) {
		return nil, nil, fmt.Errorf("storage: get member: %w", storage.ErrNotFound)
	}
	var or organizationRecord
	var ur userRecord
	err := s.view(ctx, func(txn *tx) (err error) {
		if or, _, err = getCached[organizationRecord](s, txn, organizationKey(orgID)); err != nil {
			return err
		}
		ur, _, err = getCached[userRecord](s, txn, userKey(orgID, userID))
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("storage: get member: %w", err)
	}
	o, u := or.organization(), ur.user()
	return &o, &u, nil
}

// ListUsers returns one page of the organization's users in creation order.
func (s *Store) ListUsers(ctx context.Context, orgID string, req storage.PageRequest) ([]storage.User, storage.PageInfo, error) {
	if !storage.ValidID(orgID) {
		return nil, storage.PageInfo{Limit: req.Limit}, fmt.Errorf("storage: list users: %w", storage.ErrNotFound)
	}
	out := make([]storage.User, 0, req.Limit)
	var info storage.PageInfo
	err := s.view(ctx, func(txn *tx) (err error) {
		info, err = s.listPage(txn, storage.UserList(orgID), usersPrefix(orgID), req, func(_, v []byte) error {
			var r userRecord
			if err := decode(v, &r); err != nil {
				return err
			}
			out = append(out, r.user())
			return nil
		})
		return err
	})
	if err != nil {
		return nil, info, fmt.Errorf("storage: list users: %w", err)
	}
	return out, info, nil
}

// SetUserDisabled disables or enables a user (spec 3.2). Both directions
// set the role to member; a disable records its time in DisabledAt, which
// an enable keeps. changed is false, and nothing is written, when the user
// already was in the requested state.
func (s *Store) SetUserDisabled(ctx context.Context, orgID, userID string, disabled bool) (u *storage.User, changed bool, err error) {
	if !storage.ValidIDs(orgID, userID) {
		return nil, false, fmt.Errorf("storage: set user disabled: %w", storage.ErrNotFound)
	}
	var r userRecord
	err = s.update(ctx, func(txn *tx) error {
		r, changed = userRecord{}, false
		if err := getRecord(txn, userKey(orgID, userID), &r); err != nil {
			return err
		}
		if r.Disabled == disabled {
			return nil
		}
		changed = true
		r.Disabled = disabled
		r.Role = string(storage.RoleMember)
		r.UpdatedAt = s.nowUTC()
		if disabled {
			r.DisabledAt = storage.NextDisabledAt(r.DisabledAt, r.UpdatedAt)
			r.UpdatedAt = r.DisabledAt
		}
		return putRecord(txn, userKey(orgID, userID), r)
	})
	if err != nil {
		return nil, false, fmt.Errorf("storage: set user disabled: %w", err)
	}
	user := r.user()
	return &user, changed, nil
}
