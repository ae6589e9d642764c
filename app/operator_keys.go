package app

import (
	"errors"
	"net/http"
	"time"

	"github.com/invopop/validation"
	"github.com/labstack/echo/v4"

	"github.com/rxgate/rxgate/storage"
)

// The operator API's operator keys (admins only, roleMatrix): create, with
// the key shown once; list, without secrets; revoke.

// OperatorKeyCreateRequest is the body of POST /admin/v1/operator-keys.
type OperatorKeyCreateRequest struct {
	Name string `json:"name"`
	Role string `json:"role"`
}

// Validate checks the request: a name and a role parseRole accepts.
func (r *OperatorKeyCreateRequest) Validate() error {
	return validation.ValidateStruct(r,
		validation.Field(&r.Name, notBlank, validation.RuneLength(1, 200)),
		validation.Field(&r.Role, validation.Required, validation.By(func(any) error {
			_, err := parseRole(r.Role)
			return err
		})),
	)
}

// OperatorKeyView is an operator key as the operator API shows it. Key is
// what its holder sends as a Bearer credential, set only on create: only
// its hash is kept.
type OperatorKeyView struct {
	KeyID     string     `json:"key_id"`
	Name      string     `json:"name"`
	Role      string     `json:"role"`
	Key       string     `json:"key,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at"`
}

func operatorKeyView(k *storage.OperatorKey, key string) OperatorKeyView {
	return OperatorKeyView{KeyID: k.ID, Name: k.Name, Role: k.Role, Key: key, CreatedAt: k.CreatedAt, RevokedAt: k.RevokedAt}
}

func (a *App) createOperatorKey(c echo.Context) error {
	var req OperatorKeyCreateRequest
	if err := bindAdmin(c, &req); err != nil {
		return err
	}
	ctx := c.Request().Context()
	if partnerID, _ := parseRole(req.Role); partnerID != "" {
		_, err := a.store.GetPartner(ctx, partnerID)
		if errors.Is(err, storage.ErrNotFound) {
			return errValidation(http.StatusUnprocessableEntity, []FieldError{{Field: "role", Message: "must name an existing partner", Code: codeValidation}})
		}
		if err != nil {
			return err
		}
	}
	secret := storage.NewSecret()
	k := &storage.OperatorKey{Name: req.Name, Role: req.Role, SecretHash: storage.HashSecret(secret)}
	err := a.store.CreateOperatorKey(ctx, k)
	if errors.Is(err, storage.ErrAlreadyExists) {
		return errConflict("An operator key with this name exists (or existed: names of revoked keys stay taken).").withCause(err)
	}
	if err != nil {
		return err
	}
	return a.created(c, "Operator key created", operatorKeyView(k, operatorKeyToken(k.ID, secret)))
}

func (a *App) listOperatorKeys(c echo.Context) error {
	ks, err := a.store.ListOperatorKeys(c.Request().Context())
	if err != nil {
		return err
	}
	out := make([]OperatorKeyView, len(ks))
	for i := range ks {
		out[i] = operatorKeyView(&ks[i], "")
	}
	return a.ok(c, "Operator keys retrieved", out)
}

func (a *App) revokeOperatorKey(c echo.Context) error {
	if err := pathUUID(c, "key_id"); err != nil {
		return err
	}
	k, err := a.store.RevokeOperatorKey(c.Request().Context(), c.Param("key_id"))
	if err != nil {
		return err
	}
	return a.ok(c, "Operator key revoked", operatorKeyView(k, ""))
}
