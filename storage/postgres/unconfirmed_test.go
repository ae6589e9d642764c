package postgres_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
	"github.com/rxgate/rxgate/testsuite"
	"github.com/rxgate/rxgate/testsuite/storagetest"
)

// TestUnconfirmedCommitNotAcknowledged: a write whose transaction hears
// PostgreSQL's warning that the wait for the synchronous standby was
// cancelled is not acknowledged (ErrUnavailable, a 503), on both write
// paths: the pipelined one (a prescription's create) and pgx.Tx (a
// patient's update). A trigger raises the server's own warning, which
// a primary that lost its standby in a switch sends at COMMIT; without
// one, the same writes succeed.
func TestUnconfirmedCommitNotAcknowledged(t *testing.T) {
	testsuite.PostgresURL(t)
	s := openConformanceStore(t, testsuite.NewSchema(), nil)
	t.Cleanup(func() {
		assert.NoError(t, s.DropSchema(context.Background()))
		assert.NoError(t, s.Close())
	})
	ctx := t.Context()
	w := storagetest.NewWorld(t, s)
	rx := &storage.Prescription{OrgID: w.Organization.ID, UserID: w.User.ID, PatientID: w.Patient.ID}
	require.NoError(t, s.CreatePrescription(ctx, rx), "no warning: acknowledged")

	exec := func(sql string) {
		t.Helper()
		_, err := s.Pool().Exec(ctx, sql)
		require.NoError(t, err)
	}
	schema := pgx.Identifier{s.Schema()}.Sanitize()
	exec(fmt.Sprintf(`CREATE FUNCTION %s.unconfirmed() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			RAISE WARNING 'canceling wait for synchronous replication due to user request'
				USING DETAIL = 'The transaction has already committed locally, but might not have been replicated to the standby.';
			RETURN NEW;
		END $$`, schema))
	exec(fmt.Sprintf(`CREATE TRIGGER unconfirmed AFTER INSERT ON %s.prescriptions FOR EACH ROW EXECUTE FUNCTION %[1]s.unconfirmed()`, schema))
	exec(fmt.Sprintf(`CREATE TRIGGER unconfirmed AFTER UPDATE ON %s.patients FOR EACH ROW EXECUTE FUNCTION %[1]s.unconfirmed()`, schema))

	before := s.FailoverCounts()
	err := s.CreatePrescription(ctx, &storage.Prescription{OrgID: w.Organization.ID, UserID: w.User.ID, PatientID: w.Patient.ID})
	require.ErrorIs(t, err, storage.ErrUnavailable, "pipelined create")

	_, err = s.UpdatePatient(ctx, w.Organization.ID, w.User.ID, w.Patient.ID, func(p *storage.Patient) error {
		p.PartnerPatientID = "changed"
		return nil
	})
	require.ErrorIs(t, err, storage.ErrUnavailable, "update in a pgx.Tx")
	after := s.FailoverCounts()
	assert.Equal(t, int64(2), after.UnconfirmedCommits-before.UnconfirmedCommits, "both counted for the operator's metric")
	assert.Greater(t, after.PoolResets, before.PoolResets, "the warning resets the pool")

	exec(fmt.Sprintf(`DROP TRIGGER unconfirmed ON %s.prescriptions`, schema))
	require.NoError(t, s.CreatePrescription(ctx, &storage.Prescription{OrgID: w.Organization.ID, UserID: w.User.ID, PatientID: w.Patient.ID}),
		"the marked connection was dropped; the next write is acknowledged")
}
