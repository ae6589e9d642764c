// Package retention is the store's housekeeping on a schedule: the
// Janitor purges the webhook events older than the retention, runs the
// backend's garbage collection and takes the scheduled backups. It sees
// the store through storage's interfaces only; the command wiring gives
// it the optional capabilities the backend has.
package retention

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/rxgate/rxgate/storage"
	"github.com/rxgate/rxgate/storage/backup"
)

// Options configure the store's housekeeping.
type Options struct {
	// Retention is how long delivered, failed and skipped events are kept
	// (webhooks.retention); 0 keeps them forever.
	Retention time.Duration
	// PurgeEvery is how often events are purged; 0 means an hour.
	PurgeEvery time.Duration
	// AuditRetention is how long audit entries are kept (audit.retention),
	// apart from the events' Retention; 0 keeps them forever. PurgeAudit
	// deletes the entries before a cutoff, keeping a signed marker of
	// where the retained chain starts (it needs the audit key, which the
	// store does not hold: app.AuditTrail.PurgeBefore); nil purges none.
	AuditRetention time.Duration
	PurgeAudit     func(ctx context.Context, cutoff time.Time) (int, error)
	// GC, when set, gives disk space back (Badger's value-log garbage
	// collection); GCEvery is how often (storage.gc_interval), 0 never.
	GC      storage.GarbageCollector
	GCEvery time.Duration
	// Backup, when set with BackupDir and BackupEvery, writes a backup
	// to BackupDir every BackupEvery and keeps the newest BackupKeep.
	Backup      storage.Backuper
	BackupDir   string
	BackupEvery time.Duration
	BackupKeep  int
	// Version is the rxgate version a backup's header records.
	Version string
	// OnBackup, when set, hears of each scheduled backup (for metrics).
	OnBackup func(at time.Time, err error)
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger receives the housekeeping's logs; nil discards them.
	Logger *slog.Logger
}

// Janitor runs the store's housekeeping on a schedule, in one goroutine
// that Start starts and Stop stops: it purges the events older than the
// retention (never a pending one, storage.Store.PurgeEvents), runs the
// garbage collection and takes the scheduled backups.
type Janitor struct {
	store storage.Store
	opts  Options
	stop  context.CancelFunc
	done  chan struct{}
	once  sync.Once
}

// New returns a stopped Janitor.
func New(store storage.Store, opts Options) *Janitor {
	if opts.PurgeEvery <= 0 {
		opts.PurgeEvery = time.Hour
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Janitor{store: store, opts: opts, done: make(chan struct{})}
}

// Start runs the schedule until Stop: a purge soon after start and then
// every PurgeEvery, a collection every GCEvery, a backup every
// BackupEvery.
func (j *Janitor) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	j.stop = cancel
	go j.loop(ctx)
}

// Stop ends the schedule and waits for a purge or collection in progress.
func (j *Janitor) Stop() {
	j.once.Do(func() {
		if j.stop == nil {
			close(j.done)
			return
		}
		j.stop()
		<-j.done
	})
}

func (j *Janitor) loop(ctx context.Context) {
	defer close(j.done)
	purge := time.NewTimer(time.Minute) // not in the way of start-up
	defer purge.Stop()
	var gc, backups <-chan time.Time
	var backupTimer *time.Timer
	if j.opts.GC != nil && j.opts.GCEvery > 0 {
		t := time.NewTicker(j.opts.GCEvery)
		defer t.Stop()
		gc = t.C
	}
	if j.opts.Backup != nil && j.opts.BackupDir != "" && j.opts.BackupEvery > 0 {
		// The schedule runs from the newest backup in the directory, so
		// that restarts more often than the interval do not put the next
		// backup off for ever; one overdue is taken a minute after start.
		last := backup.Last(j.opts.BackupDir)
		if !last.IsZero() && j.opts.OnBackup != nil {
			j.opts.OnBackup(last, nil)
		}
		backupTimer = time.NewTimer(max(time.Minute, last.Add(j.opts.BackupEvery).Sub(j.opts.Now())))
		defer backupTimer.Stop()
		backups = backupTimer.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-purge.C:
			j.purge(ctx)
			j.purgeAudit(ctx)
			purge.Reset(j.opts.PurgeEvery)
		case <-gc:
			if err := j.opts.GC.CollectGarbage(); err != nil {
				j.opts.Logger.Error("garbage collection failed", "error", err)
			}
		case <-backups:
			j.backup(ctx)
			backupTimer.Reset(j.opts.BackupEvery)
		}
	}
}

// purge deletes the events older than the retention; it returns how many.
func (j *Janitor) purge(ctx context.Context) int {
	if j.opts.Retention <= 0 {
		return 0
	}
	n, err := j.store.PurgeEvents(ctx, j.opts.Now().Add(-j.opts.Retention))
	if err != nil {
		if ctx.Err() == nil {
			j.opts.Logger.Error("purging old events failed", "error", err, "purged", n)
		}
		return n
	}
	if n > 0 {
		j.opts.Logger.Info("purged old events", "purged", n, "retention", j.opts.Retention.String())
	}
	return n
}

// purgeAudit deletes the audit entries older than AuditRetention; it
// returns how many.
func (j *Janitor) purgeAudit(ctx context.Context) int {
	if j.opts.AuditRetention <= 0 || j.opts.PurgeAudit == nil {
		return 0
	}
	n, err := j.opts.PurgeAudit(ctx, j.opts.Now().Add(-j.opts.AuditRetention))
	if err != nil {
		if ctx.Err() == nil {
			j.opts.Logger.Error("purging old audit entries failed", "error", err, "purged", n)
		}
		return n
	}
	if n > 0 {
		j.opts.Logger.Info("purged old audit entries", "purged", n, "retention", j.opts.AuditRetention.String())
	}
	return n
}

// backup writes a scheduled backup and deletes the oldest beyond the
// number kept.
func (j *Janitor) backup(ctx context.Context) error {
	at := j.opts.Now()
	_, h, err := backup.WriteScheduled(j.opts.BackupDir, at, func(f *os.File) error {
		_, err := j.opts.Backup.WriteBackup(ctx, f, j.opts.Version)
		return err
	})
	if err == nil {
		err = backup.Prune(j.opts.BackupDir, max(1, j.opts.BackupKeep))
	}
	if j.opts.OnBackup != nil {
		j.opts.OnBackup(at, err)
	}
	if err != nil {
		if ctx.Err() == nil {
			j.opts.Logger.Error("scheduled backup failed", "dir", j.opts.BackupDir, "error", err)
		}
		return err
	}
	j.opts.Logger.Info("backup written", "dir", j.opts.BackupDir, "entries", h.Entries, "encrypted", h.Encrypted)
	return nil
}
