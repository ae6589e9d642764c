package backup

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestWriteFile: a file with the name appears only when the write
// finished and the file verified; a failed write or a file that is not a
// whole backup leaves nothing behind, and a Verify failure wraps
// ErrInvalid.
func TestWriteFile(t *testing.T) {
	t.Parallel()
	whole, err := os.ReadFile(write(t, nil, []kv{{"a", "1"}, {"b", "2"}}))
	require.NoError(t, err)
	failed := errors.New("the download broke")
	tests := []struct {
		name    string
		content []byte
		err     error // returned by the write
		wantErr error // nil: the file is written
	}{
		{name: "whole", content: whole},
		{name: "write fails", content: whole[:10], err: failed, wantErr: failed},
		{name: "truncated", content: whole[:len(whole)-1], wantErr: ErrInvalid},
		{name: "not a backup", content: []byte("<html>"), wantErr: ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			h, err := WriteFile(dir, "out.rxb", func(f *os.File) error {
				_, werr := f.Write(tt.content)
				require.NoError(t, werr)
				return tt.err
			})
			entries, rerr := os.ReadDir(dir)
			require.NoError(t, rerr)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				require.Empty(t, entries, "nothing is left behind")
				return
			}
			require.NoError(t, err)
			require.Equal(t, uint64(2), h.Entries)
			require.Len(t, entries, 1, "no temporary file is left")
			require.Equal(t, "out.rxb", entries[0].Name())
			got, err := os.ReadFile(filepath.Join(dir, "out.rxb"))
			require.NoError(t, err)
			require.Equal(t, whole, got)
		})
	}
}

// TestScheduled: the schedule's names sort by time, Last reads the newest,
// and Prune keeps the newest and removes the schedule's unfinished files,
// but not the temporary file of another writer (`rxgate backup --out`
// into the same directory under a scheduled backup's name).
func TestScheduled(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	at := time.Date(2026, 11, 25, 1, 2, 3, 456e6, time.UTC)
	names := []string{FileName(at), FileName(at.Add(time.Hour)), FileName(at.Add(25 * time.Hour))}
	require.Equal(t, "rxgate-20261125T010203.456Z.rxb", names[0])
	for _, n := range append([]string{"." + names[2] + ".123.tmp", ".rxgate-backup-9.tmp", "other.rxb"}, names...) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, n), nil, 0o600))
	}
	require.Equal(t, at.Add(25*time.Hour), Last(dir))
	require.NoError(t, Prune(dir, 2))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	require.Equal(t, []string{"." + names[2] + ".123.tmp", "other.rxb", names[1], names[2]}, left)
	require.True(t, Last(t.TempDir()).IsZero())
}

// TestWriteScheduled: a scheduled backup gets the schedule's name, and
// while it is written its temporary file is one Prune would clear after a
// crash, while another writer's, under the same final name, is not.
func TestWriteScheduled(t *testing.T) {
	t.Parallel()
	whole, err := os.ReadFile(write(t, nil, []kv{{"a", "1"}}))
	require.NoError(t, err)
	dir := t.TempDir()
	at := time.Date(2026, 11, 25, 1, 2, 3, 0, time.UTC)
	name, h, err := WriteScheduled(dir, at, func(f *os.File) error {
		_, unfinished, err := Scheduled(dir)
		require.NoError(t, err)
		require.Equal(t, []string{filepath.Base(f.Name())}, unfinished, "the schedule's own temporary file")
		_, err = f.Write(whole)
		return err
	})
	require.NoError(t, err)
	require.Equal(t, FileName(at), name)
	require.Equal(t, uint64(1), h.Entries)
	_, err = WriteFile(dir, FileName(at.Add(time.Hour)), func(f *os.File) error {
		_, unfinished, err := Scheduled(dir)
		require.NoError(t, err)
		require.Empty(t, unfinished, "another writer's temporary file is not the schedule's")
		_, err = f.Write(whole)
		return err
	})
	require.NoError(t, err)
	names, _, err := Scheduled(dir)
	require.NoError(t, err)
	require.Equal(t, []string{FileName(at), FileName(at.Add(time.Hour))}, names)
}
