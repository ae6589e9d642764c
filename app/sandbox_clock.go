package app

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/invopop/validation"
	"github.com/labstack/echo/v4"
)

// SandboxClock is the clock `rxgate sandbox` lets an operator move
// forward (queue.OffsetClock): every part of the server reads it, so
// advancing it makes retries fall due, tokens expire and retention purge
// without waiting. rxgate serve has none.
type SandboxClock interface {
	Now() time.Time
	// Advance moves the clock forward by d and returns the new time.
	Advance(d time.Duration) time.Time
	// Offset is how far it has been moved in all.
	Offset() time.Duration
}

// maxClockAdvance bounds one advance of the sandbox clock.
const maxClockAdvance = 30 * 24 * time.Hour

// errNotSandbox answers a clock move on a server that is not a sandbox.
func errNotSandbox() *Error {
	return errConflict("The clock can be moved only in rxgate sandbox; this server runs rxgate serve, on the real clock.")
}

// SandboxClockRequest is the body of POST /admin/v1/sandbox/clock.
type SandboxClockRequest struct {
	// Advance is a duration: Go's syntax ("90s", "1h30m") or whole days
	// ("2d"); more than 0, at most 30 days.
	Advance string `json:"advance"`

	d time.Duration
}

// Validate parses and bounds Advance.
func (r *SandboxClockRequest) Validate() error {
	return validation.ValidateStruct(r,
		validation.Field(&r.Advance, validation.Required, validation.By(func(any) error {
			d, err := parseAdvance(r.Advance)
			if err != nil {
				return err
			}
			r.d = d
			return nil
		})),
	)
}

// parseAdvance reads a positive duration of at most maxClockAdvance.
func parseAdvance(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 || n > 30 {
			return 0, errors.New(`must be a duration such as "90s", "1h30m" or "2d", more than 0 and at most 30 days`)
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, errors.New(`must be a duration such as "90s", "1h30m" or "2d", more than 0 and at most 30 days`)
		}
	}
	if d <= 0 {
		return 0, errors.New("must be more than 0: the clock only moves forward")
	}
	if d > maxClockAdvance {
		return 0, errors.New("must be at most 30 days per call")
	}
	return d, nil
}

// SandboxClockView is the sandbox clock after a move.
type SandboxClockView struct {
	// Now is the server's time now.
	Now time.Time `json:"now"`
	// AdvancedSeconds is this call's move.
	AdvancedSeconds int64 `json:"advanced_seconds"`
	// OffsetSeconds is how far ahead of the real time the clock is.
	OffsetSeconds int64 `json:"offset_seconds"`
}

// advanceSandboxClock is POST /admin/v1/sandbox/clock: in rxgate sandbox,
// moves the server's clock forward; elsewhere 409 (the route exists on
// every server, so that a client told "sandbox only" is not left guessing
// at a wrong URL).
func (a *App) advanceSandboxClock(c echo.Context) error {
	if a.sandboxClock == nil {
		return errNotSandbox()
	}
	req := &SandboxClockRequest{}
	if err := bindAdmin(c, req); err != nil {
		return err
	}
	v := a.moveSandboxClock(req.d)
	return a.ok(c, "Sandbox clock advanced", v)
}

// moveSandboxClock advances the sandbox clock by d (checked) and logs it.
func (a *App) moveSandboxClock(d time.Duration) SandboxClockView {
	now := a.sandboxClock.Advance(d)
	off := a.sandboxClock.Offset()
	a.log.Info("sandbox clock advanced", "advance", d.String(), "offset", off.String())
	return SandboxClockView{Now: now.UTC(), AdvancedSeconds: int64(d / time.Second), OffsetSeconds: int64(off / time.Second)}
}

// sessionNow is the clock of console sessions and sign-in links: the real
// time in the sandbox, so that moving the clock does not sign the operator
// moving it out; the App's clock elsewhere.
func (a *App) sessionNow() time.Time {
	if a.sandboxClock != nil {
		return time.Now()
	}
	return a.now()
}
