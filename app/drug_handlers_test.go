package app

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/app/auth"
	"github.com/rxgate/rxgate/config"
	"github.com/rxgate/rxgate/storage"
)

// drugApp is a served App on an in-memory store with one organization, an
// admin and a prescriber, and tokens of both carrying every scope.
type drugApp struct {
	a                       *App
	org, secret             string
	admin, prescriber       string
	adminTok, prescriberTok string
}

// newDrugApp builds a drugApp. The App serves on loopback, because the
// verifier reads the built-in issuer's keys over HTTP; requests go through
// its partner handler in-process.
// maxBulkDrugs is the default http.max_bulk_drugs, which the test apps run
// with.
var maxBulkDrugs = config.Defaults().HTTP.MaxBulkDrugs

func newDrugApp(tb testing.TB) *drugApp {
	tb.Helper()
	return newDrugAppWith(tb, nil)
}

// newDrugAppWith is newDrugApp with the configuration changed by edit.
func newDrugAppWith(tb testing.TB, edit func(*config.Config)) *drugApp {
	tb.Helper()
	a, store := newTestAppWith(tb, Options{}, edit)

	ctx := context.Background()
	secret := storage.NewSecret()
	p := &storage.Partner{Name: "Drug test partner", SecretHash: storage.HashSecret(storage.NewSecret())}
	require.NoError(tb, store.CreatePartner(ctx, p))
	o := &storage.Organization{Name: "Drug test clinic", PartnerID: p.ID, AllowedScopes: auth.PartnerScopes, SecretHash: storage.HashSecret(secret)}
	require.NoError(tb, store.CreateOrganization(ctx, o))
	d := &drugApp{a: a, org: o.ID, secret: secret}
	for _, u := range []struct {
		role storage.Role
		id   *string
		tok  *string
	}{
		{storage.RoleAdmin, &d.admin, &d.adminTok},
		{storage.RolePrescriber, &d.prescriber, &d.prescriberTok},
	} {
		user := &storage.User{OrgID: o.ID, Email: string(u.role) + "@drugs.example", GivenName: "Ada", FamilyName: "Byron", Title: "Dr", Role: u.role}
		require.NoError(tb, store.CreateUser(ctx, user))
		*u.id = user.ID
		*u.tok = d.mint(tb, user.ID, auth.PartnerScopes...)
	}
	return d
}

// mint returns a token of user with scopes.
func (d *drugApp) mint(tb testing.TB, user string, scopes ...string) string {
	tb.Helper()
	tok, _, err := d.a.Issuer().Mint(auth.MintRequest{UserID: user, OrgID: d.org, Scopes: scopes, TTL: time.Hour})
	require.NoError(tb, err)
	return tok
}

// request builds a partner request; path is relative to the organization.
func (d *drugApp) request(method, path, token string, body []byte) *http.Request {
	var r *http.Request
	url := d.a.cfg.HTTP.BasePath + "/v1/organizations/" + d.org + path
	if body != nil {
		r = httptest.NewRequest(method, url, bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
	} else {
		r = httptest.NewRequest(method, url, nil)
	}
	r.Header.Set("Authorization", "Bearer "+token)
	r.Header.Set(headerOrganizationSecret, d.secret)
	return r
}

// drugAnswer is a decoded answer of a custom drug operation.
type drugAnswer struct {
	Success    bool            `json:"success"`
	StatusCode int             `json:"statusCode"`
	Message    string          `json:"message"`
	Data       json.RawMessage `json:"data"`
	Error      *struct {
		Type       string       `json:"type"`
		Title      string       `json:"title"`
		Detail     string       `json:"detail"`
		Validation []FieldError `json:"validation"`
	} `json:"error"`
}

// do serves r through the partner handler and decodes the answer.
func (d *drugApp) do(tb testing.TB, r *http.Request) (int, drugAnswer, string) {
	tb.Helper()
	rec := httptest.NewRecorder()
	d.a.PartnerHandler().ServeHTTP(rec, r)
	var ans drugAnswer
	require.NoError(tb, json.Unmarshal(rec.Body.Bytes(), &ans), "body %s", rec.Body.String())
	assert.Equal(tb, rec.Code, ans.StatusCode, "statusCode")
	return rec.Code, ans, rec.Body.String()
}

// bulk sends body to bulk create with the admin token.
func (d *drugApp) bulk(tb testing.TB, body []byte) (int, drugAnswer, string) {
	tb.Helper()
	return d.do(tb, d.request(http.MethodPost, "/custom-drugs", d.adminTok, body))
}

// validDrugJSON is one valid drug object; n makes the name unique.
func validDrugJSON(n int) string {
	return `{"item_generic_name":"Drug ` + strconv.Itoa(n) + `","item_strength":"500 mg","item_form":"capsule",` +
		`"route_of_administration":"oral","quantity":20,"max_repeats":"2","poison_class":"S4","brand_name":"Brand"}`
}

// badDrugJSON is a drug object missing quantity.
const badDrugJSON = `{"item_generic_name":"Bad","item_strength":"1 mg","item_form":"tablet","route_of_administration":"oral","max_repeats":"0","poison_class":"S4"}`

// drugArray builds a JSON array of n items; bad reports whether the item
// at 1-based index i is invalid.
func drugArray(n int, bad func(i int) bool) []byte {
	var b strings.Builder
	b.WriteByte('[')
	for i := 1; i <= n; i++ {
		if i > 1 {
			b.WriteByte(',')
		}
		if bad(i) {
			b.WriteString(badDrugJSON)
		} else {
			b.WriteString(validDrugJSON(i))
		}
	}
	b.WriteByte(']')
	return []byte(b.String())
}

func TestBulkCreateCustomDrugsSummary(t *testing.T) {
	t.Parallel()
	d := newDrugApp(t)
	all := func(int) bool { return true }
	tests := []struct {
		name         string
		n            int
		bad          func(i int) bool
		wantStatus   int
		wantFailures int // failureCount
	}{
		{name: "one good item", n: 1, bad: func(int) bool { return false }, wantStatus: http.StatusOK},
		{name: "one bad item", n: 1, bad: all, wantStatus: http.StatusBadRequest, wantFailures: 1},
		{name: "50 bad items, all listed", n: 50, bad: all, wantStatus: http.StatusBadRequest, wantFailures: 50},
		{name: "51 bad items, 50 listed", n: 51, bad: all, wantStatus: http.StatusBadRequest, wantFailures: 51},
		{name: "120 bad items, 50 listed", n: 120, bad: all, wantStatus: http.StatusBadRequest, wantFailures: 120},
		{name: "one good item among 120 bad", n: 121, bad: func(i int) bool { return i != 61 }, wantStatus: http.StatusOK, wantFailures: 120},
		{name: "one good item first among 51 bad", n: 52, bad: func(i int) bool { return i != 1 }, wantStatus: http.StatusOK, wantFailures: 51},
		{name: "one good item last among 51 bad", n: 52, bad: func(i int) bool { return i != 52 }, wantStatus: http.StatusOK, wantFailures: 51},
		{name: "every third item bad", n: 180, bad: func(i int) bool { return i%3 == 0 }, wantStatus: http.StatusOK, wantFailures: 60},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			status, ans, raw := d.bulk(t, drugArray(tt.n, tt.bad))
			require.Equal(t, tt.wantStatus, status, raw)
			var res BulkResult
			require.NoError(t, json.Unmarshal(ans.Data, &res), "data of %s", raw)
			assert.Equal(t, tt.n, res.Total)
			assert.Equal(t, tt.wantFailures, res.FailureCount)
			assert.Equal(t, tt.n-tt.wantFailures, res.SuccessCount)

			var wantIdx []int
			for i := 1; i <= tt.n && len(wantIdx) < maxListedFailures; i++ {
				if tt.bad(i) {
					wantIdx = append(wantIdx, i)
				}
			}
			gotIdx := make([]int, len(res.Failures))
			for i, f := range res.Failures {
				gotIdx[i] = f.Index
				assert.Equal(t, "quantity: is required", f.Error, "failure %d", f.Index)
			}
			assert.Equal(t, nonNilInts(wantIdx), gotIdx, "failures list the first 50 bad items by 1-based index")
			assert.LessOrEqual(t, len(res.Failures), 50)

			if status == http.StatusOK {
				assert.True(t, ans.Success)
				assert.Nil(t, ans.Error)
				assert.Contains(t, ans.Message, strconv.Itoa(res.SuccessCount))
				return
			}
			// All failed: the error envelope, with the summary in data.
			assert.False(t, ans.Success)
			require.NotNil(t, ans.Error, raw)
			assert.True(t, strings.HasSuffix(ans.Error.Type, "/"+slugValidation), ans.Error.Type)
			assert.NotEmpty(t, ans.Error.Title)
			assert.NotEmpty(t, ans.Error.Detail)
			assert.Equal(t, 0, res.SuccessCount)
		})
	}
}

// TestBulkCreateCustomDrugsItems checks items that are not drug objects:
// each is a failure of its own, and the others are stored.
func TestBulkCreateCustomDrugsItems(t *testing.T) {
	t.Parallel()
	d := newDrugApp(t)
	body := []byte(`[` + validDrugJSON(1) + `,5,null,"drug",[],{},{"foo":1},` + validDrugJSON(2) + `]`)
	status, ans, raw := d.bulk(t, body)
	require.Equal(t, http.StatusOK, status, raw)
	var res BulkResult
	require.NoError(t, json.Unmarshal(ans.Data, &res))
	assert.Equal(t, BulkResult{Total: 8, SuccessCount: 2, FailureCount: 6, Failures: res.Failures}, res)
	idx := make([]int, len(res.Failures))
	for i, f := range res.Failures {
		idx[i] = f.Index
		assert.NotEmpty(t, f.Error)
	}
	assert.Equal(t, []int{2, 3, 4, 5, 6, 7}, idx)
	assert.Contains(t, res.Failures[5].Error, "foo")
}

// TestBulkCreateCustomDrugsBodies checks bodies refused whole.
func TestBulkCreateCustomDrugsBodies(t *testing.T) {
	t.Parallel()
	d := newDrugApp(t)
	tests := []struct {
		name       string
		body       []byte
		wantStatus int
		wantDetail string // a substring of error.detail
	}{
		{name: "object", body: []byte(validDrugJSON(1)), wantStatus: http.StatusBadRequest, wantDetail: "non-empty JSON array"},
		{name: "empty array", body: []byte(`[]`), wantStatus: http.StatusBadRequest, wantDetail: "non-empty JSON array"},
		{name: "empty array with spaces", body: []byte(" [ ] "), wantStatus: http.StatusBadRequest, wantDetail: "non-empty JSON array"},
		{name: "string", body: []byte(`"drugs"`), wantStatus: http.StatusBadRequest, wantDetail: "non-empty JSON array"},
		{name: "number", body: []byte(`1`), wantStatus: http.StatusBadRequest, wantDetail: "non-empty JSON array"},
		{name: "null", body: []byte(`null`), wantStatus: http.StatusBadRequest, wantDetail: "non-empty JSON array"},
		{name: "no body", body: nil, wantStatus: http.StatusBadRequest, wantDetail: "non-empty JSON array"},
		{name: "malformed", body: []byte(`[{"item_form":`), wantStatus: http.StatusBadRequest, wantDetail: "not valid JSON"},
		{name: "one over the maximum", body: drugArray(maxBulkDrugs+1, func(int) bool { return true }),
			wantStatus: http.StatusBadRequest, wantDetail: "At most " + strconv.Itoa(maxBulkDrugs) + " custom drugs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			status, ans, raw := d.bulk(t, tt.body)
			require.Equal(t, tt.wantStatus, status, raw)
			require.NotNil(t, ans.Error, raw)
			assert.Contains(t, ans.Error.Detail, tt.wantDetail)
			assert.Empty(t, ans.Data, "a request refused whole has no summary")
		})
	}
	t.Run("nothing was stored", func(t *testing.T) {
		drugs, n, err := d.a.store.ListCustomDrugsJSON(t.Context(), d.org, d.prescriber, nil)
		require.NoError(t, err)
		assert.Zero(t, n)
		assert.Equal(t, "[]", string(drugs))
	})
}

// TestBulkCreateCustomDrugsTinyElements: a body of two million tiny
// elements (4 MB, under the body limit) is refused at the first element
// over the cap, not after decoding them all, which cost seconds of CPU and
// a few hundred megabytes; it counts allocations, never time. Not
// parallel: the count is the process's.
func TestBulkCreateCustomDrugsTinyElements(t *testing.T) {
	d := newDrugApp(t)
	body := append(bytes.Repeat([]byte("0,"), 2_000_000), '0')
	body = append(append([]byte("["), body...), ']')
	var status int
	var detail string
	allocs := testing.AllocsPerRun(1, func() {
		var ans drugAnswer
		status, ans, _ = d.bulk(t, body)
		if ans.Error != nil {
			detail = ans.Error.Detail
		}
	})
	require.Equal(t, http.StatusBadRequest, status)
	assert.Contains(t, detail, "At most "+strconv.Itoa(maxBulkDrugs)+" custom drugs")
	assert.Less(t, allocs, 50_000.0, "allocations grow with the elements past the cap")
}

// TestBulkCreateCustomDrugsLarge checks that the maximum and a 1,000-item
// request work and are stored at organization level.
func TestBulkCreateCustomDrugsLarge(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		n    int
	}{
		{name: "1000 items", n: 1000},
		{name: "the maximum", n: maxBulkDrugs},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := newDrugApp(t)
			status, ans, raw := d.bulk(t, drugArray(tt.n, func(int) bool { return false }))
			require.Equal(t, http.StatusOK, status, "%.300s", raw)
			var res BulkResult
			require.NoError(t, json.Unmarshal(ans.Data, &res))
			assert.Equal(t, BulkResult{Total: tt.n, SuccessCount: tt.n, Failures: []BulkFailure{}}, res)

			status, ans, raw = d.do(t, d.request(http.MethodGet, "/users/"+d.prescriber+"/custom-drugs", d.prescriberTok, nil))
			require.Equal(t, http.StatusOK, status, "%.300s", raw)
			var drugs []map[string]any
			require.NoError(t, json.Unmarshal(ans.Data, &drugs))
			require.Len(t, drugs, tt.n)
			ids := map[any]bool{}
			for _, dr := range drugs {
				ids[dr["custom_drug_id"]] = true
				assert.Equal(t, "20", dr["quantity"])
			}
			assert.Len(t, ids, tt.n, "every drug has its own id")
			assert.Equal(t, "Retrieved "+strconv.Itoa(tt.n)+" custom drugs", ans.Message)
		})
	}
}

// TestBulkCreateCustomDrugsAdminOnly checks the admin rule of spec 4.4.
func TestBulkCreateCustomDrugsAdminOnly(t *testing.T) {
	t.Parallel()
	d := newDrugApp(t)
	tests := []struct {
		name       string
		token      string
		wantStatus int
		wantDetail string
	}{
		{name: "admin", token: d.adminTok, wantStatus: http.StatusOK},
		{name: "prescriber", token: d.prescriberTok, wantStatus: http.StatusUnauthorized},
		{name: "admin without create:custom_drug", token: d.mint(t, d.admin, "read:custom_drug"),
			wantStatus: http.StatusUnauthorized, wantDetail: "Insufficient scope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, ans, raw := d.do(t, d.request(http.MethodPost, "/custom-drugs", tt.token, drugArray(1, func(int) bool { return false })))
			require.Equal(t, tt.wantStatus, status, raw)
			if tt.wantDetail != "" {
				assert.Equal(t, tt.wantDetail, ans.Error.Detail)
			}
		})
	}
}

func nonNilInts(s []int) []int {
	if s == nil {
		return []int{}
	}
	return s
}

// BenchmarkBulkCreate1000 sends one bulk create of 1,000 valid drugs through
// the partner handler per iteration.
func BenchmarkBulkCreate1000(b *testing.B) {
	d := newDrugApp(b)
	body := drugArray(1000, func(int) bool { return false })
	h := d.a.PartnerHandler()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, d.request(http.MethodPost, "/custom-drugs", d.adminTok, body))
	require.Equal(b, http.StatusOK, rec.Code, "%.300s", rec.Body.String())
	w := &statusWriter{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		clear(w.h)
		h.ServeHTTP(w, d.request(http.MethodPost, "/custom-drugs", d.adminTok, body))
		if w.status != http.StatusOK {
			b.Fatalf("status %d", w.status)
		}
	}
}

// BenchmarkListCustomDrugs lists the drugs of a user with 1,000
// organization drugs and 100 of its own through the partner handler.
func BenchmarkListCustomDrugs(b *testing.B) {
	d := newDrugApp(b)
	ctx := context.Background()
	drugs := make([]storage.CustomDrug, 0, 1100)
	for i := range 1100 {
		dr := storage.CustomDrug{OrgID: d.org, ItemGenericName: "Drug " + strconv.Itoa(i), ItemStrength: "500 mg",
			ItemForm: "capsule", RouteOfAdministration: "oral", Quantity: "20", MaxRepeats: "2", PoisonClass: "S4",
			BrandName: "Brand", Description: "A custom drug of the benchmark"}
		if i >= 1000 {
			dr.UserID = d.prescriber
		}
		drugs = append(drugs, dr)
	}
	require.NoError(b, d.a.store.CreateCustomDrugs(ctx, drugs))
	h := d.a.PartnerHandler()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, d.request(http.MethodGet, "/users/"+d.prescriber+"/custom-drugs", d.prescriberTok, nil))
	require.Equal(b, http.StatusOK, rec.Code)
	require.Contains(b, rec.Body.String(), "Retrieved 1100 custom drugs")
	req := d.request(http.MethodGet, "/users/"+d.prescriber+"/custom-drugs", d.prescriberTok, nil)
	w := &statusWriter{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		clear(w.h)
		h.ServeHTTP(w, req)
		if w.status != http.StatusOK {
			b.Fatalf("status %d", w.status)
		}
	}
}

// statusWriter is a ResponseWriter that keeps only the status, so that the
// benchmarks measure the handler rather than a response buffer.
type statusWriter struct {
	h      http.Header
	status int
}

func (w *statusWriter) Header() http.Header         { return w.h }
func (w *statusWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *statusWriter) WriteHeader(s int)           { w.status = s }

// FuzzBulkItems: the streaming reader of a bulk body agrees with decoding
// the whole array: the same elements when there are 1 to maxBulkDrugs,
// a refusal otherwise; never a panic.
func FuzzBulkItems(f *testing.F) {
	for _, s := range []string{`[]`, `[{}]`, `[1,2,3]`, `null`, `{}`, `[{"a":1},"x",[2]]`, ` [ 0 ] `, `[0,`, `"s"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := bulkItems(body, maxBulkDrugs)
		var want []json.RawMessage
		wantOK := json.Unmarshal(body, &want) == nil && len(want) > 0 && len(want) <= maxBulkDrugs
		if wantOK != (err == nil) {
			t.Fatalf("bulkItems(%q): error %v, whole decode ok %v", body, err, wantOK)
		}
		if err != nil {
			return
		}
		require.Len(t, got, len(want))
		for i := range want {
			require.JSONEq(t, string(want[i]), string(got[i]))
		}
	})
}
