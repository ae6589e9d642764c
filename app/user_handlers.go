package app

import (
	"errors"

	"github.com/labstack/echo/v4"

	"github.com/rxgate/rxgate/storage"
)

// User list page sizes (spec 4.9, 8).
const (
	userPageDefault = 20
	userPageMax     = 100
)

var errUserNotFound = errNotFound(slugUserNotFound, "The user does not exist in this organization.")

// UserListItem is one user of the list (spec 2.6): user_id and email only.
type UserListItem struct {
	UserID string `json:"user_id"`
	Email  string `json:"email"`
}

// listUsers is GET /v1/organizations/{id}/users (spec 4.9): cursor
// paginated, creation order.
func (a *App) listUsers(c echo.Context) error {
	req, err := pageRequest(c, userPageDefault, userPageMax)
	if err != nil {
		return err
	}
	users, info, err := a.store.ListUsers(c.Request().Context(), callerOf(c).org.ID, req)
	if err != nil {
		return err
	}
	out := make([]UserListItem, len(users))
	for i, u := range users {
		out[i] = UserListItem{UserID: u.ID, Email: u.Email}
	}
	return a.jsonPage(c, "Users retrieved successfully", out, info)
}

// getUser is GET /v1/organizations/{id}/users/{user_id} (spec 4.10).
func (a *App) getUser(c echo.Context) error {
	if pathUUID(c, "user_id") != nil {
		return errUserNotFound
	}
	u, err := a.store.GetUser(c.Request().Context(), callerOf(c).org.ID, c.Param("user_id"))
	if errors.Is(err, storage.ErrNotFound) {
		return errUserNotFound.withCause(err)
	}
	if err != nil {
		return err
	}
	return a.ok(c, "User retrieved successfully", userView(u))
}

// UserRef is the data of disable and enable: user_id only (spec 2.6).
type UserRef struct {
	UserID string `json:"user_id"`
}

// disableUser is PUT .../users/{user_id}/disable (spec 4.7, table 3.2).
func (a *App) disableUser(c echo.Context) error { return a.setUserDisabled(c, true) }

// enableUser is PUT .../users/{user_id}/enable (spec 4.8, table 3.2).
func (a *App) enableUser(c echo.Context) error { return a.setUserDisabled(c, false) }

// setUserDisabled moves a user between enabled and disabled; both moves set
// the role to member. Repeating a move changes nothing and says so.
func (a *App) setUserDisabled(c echo.Context, disabled bool) error {
	if pathUUID(c, "user_id") != nil {
		return errUserNotFound
	}
	_, changed, err := a.store.SetUserDisabled(c.Request().Context(), callerOf(c).org.ID, c.Param("user_id"), disabled)
	if errors.Is(err, storage.ErrNotFound) {
		return errUserNotFound.withCause(err)
	}
	if err != nil {
		return err
	}
	msg := map[[2]bool]string{
		{true, true}:   "User disabled successfully",
		{true, false}:  "User is already disabled",
		{false, true}:  "User enabled successfully",
		{false, false}: "User is already enabled",
	}[[2]bool{disabled, changed}]
	return a.ok(c, msg, UserRef{UserID: c.Param("user_id")})
}
