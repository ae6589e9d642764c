package postgres

import (
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"
)

// TestParseMinCompat: a migration's header line sets the lowest
// compatibility level that may run against it; none asks for nothing; a
// malformed one is an error, not a silent 0.
func TestParseMinCompat(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		sql     string
		want    int
		wantErr bool
	}{
		{name: "none", sql: "CREATE TABLE t (a int);", want: 0},
		{name: "header", sql: "-- rxgate:min-compat 3\nALTER TABLE t DROP COLUMN a;", want: 3},
		{name: "after a comment", sql: "-- contract step\n  -- rxgate:min-compat 2  \nSELECT 1;", want: 2},
		{name: "not a number", sql: "-- rxgate:min-compat two\n", wantErr: true},
		{name: "negative", sql: "-- rxgate:min-compat -1\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseMinCompat(tt.sql)
			if tt.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

// TestMigrationSetLoad: files load in the order of their numbers, which
// need not be consecutive; a file without a number or two files with one
// are refused; this build's own set loads and asks for no level above
// its own.
func TestMigrationSetLoad(t *testing.T) {
	t.Parallel()
	ms, err := migrationSet{files: fstest.MapFS{
		"0010_c.sql": {Data: []byte("-- rxgate:min-compat 2\n")},
		"0002_a.sql": {Data: []byte("SELECT 1;")},
		"0007_b.sql": {Data: []byte("SELECT 1;")},
	}}.load()
	require.NoError(t, err)
	require.Len(t, ms, 3)
	require.Equal(t, []int{2, 7, 10}, []int{ms[0].version, ms[1].version, ms[2].version})
	require.Equal(t, 2, ms[2].minCompat)

	_, err = migrationSet{files: fstest.MapFS{"init.sql": {}}}.load()
	require.ErrorContains(t, err, "not numbered")
	_, err = migrationSet{files: fstest.MapFS{"0001_a.sql": {}, "0001_b.sql": {}}}.load()
	require.ErrorContains(t, err, "share a number")

	built, err := migrations()
	require.NoError(t, err)
	require.NotEmpty(t, built)
	for _, m := range built {
		require.LessOrEqual(t, m.minCompat, Compat, "%s asks for a level this build lacks", m.name)
	}
}
