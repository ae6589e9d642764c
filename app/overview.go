package app

import (
	"context"
	"time"

	"github.com/labstack/echo/v4"
)

// OverviewView is the instance at a glance: GET /admin/v1/overview and the
// console's first page.
type OverviewView struct {
	Organizations int `json:"organizations"`
	Users         int `json:"users"`
	// Events counts the event log by status.
	Events map[string]int `json:"events"`
	// Jobs is the webhook queue; null when this process does not see it.
	Jobs *JobsView `json:"jobs"`
	// DeliveriesLastHour counts the attempts this process recorded in the
	// last hour, by outcome. It is kept in memory: a restart starts it
	// from zero, and each replica counts its own.
	DeliveriesLastHour DeliveryCounts `json:"deliveries_last_hour"`
	// LastBackupAt is when the newest scheduled backup was taken; null
	// when there is none.
	LastBackupAt *time.Time `json:"last_backup_at"`
	// Estimated says that one of the counts above or more is an estimate:
	// on PostgreSQL a figure beyond 10,000 is taken from the database's
	// statistics rather than counted (storage.Counts.Estimated).
	Estimated bool `json:"estimated"`
}

// JobsView is the webhook queue in the overview.
type JobsView struct {
	Pending int `json:"pending"`
	Leased  int `json:"leased"`
	// OldestPendingSeconds is how long the most overdue pending job has
	// been due; 0 when none is due.
	OldestPendingSeconds float64 `json:"oldest_pending_seconds"`
}

// DeliveryCounts counts delivery attempts by outcome.
type DeliveryCounts struct {
	Delivered int `json:"delivered"`
	Retry     int `json:"retry"`
	Failed    int `json:"failed"`
}

// overview reads the store's counts, the queue's state and this process's
// recent activity.
func (a *App) overview(ctx context.Context) (OverviewView, error) {
	counts, err := a.store.Count(ctx)
	if err != nil {
		return OverviewView{}, err
	}
	now := a.now()
	v := OverviewView{
		Organizations: counts.Organizations, Users: counts.Users, Events: counts.Events,
		DeliveriesLastHour: a.metrics.recent.lastHour(now), Estimated: counts.Estimated,
	}
	if jobs := a.metrics.jobs; jobs != nil {
		st, err := jobs.JobStats(ctx)
		if err != nil {
			return OverviewView{}, err
		}
		v.Jobs = &JobsView{Pending: st.Pending, Leased: st.Leased}
		v.Estimated = v.Estimated || st.Estimated
		if !st.OldestDue.IsZero() {
			v.Jobs.OldestPendingSeconds = max(0, now.Sub(st.OldestDue).Seconds())
		}
	}
	if ns := a.metrics.lastBackup.Load(); ns != 0 {
		at := time.Unix(0, ns).UTC()
		v.LastBackupAt = &at
	}
	return v, nil
}

func (a *App) getOverview(c echo.Context) error {
	v, err := a.overview(c.Request().Context())
	if err != nil {
		return err
	}
	return a.ok(c, "Overview retrieved", v)
}
