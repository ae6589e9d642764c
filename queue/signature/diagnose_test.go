package signature_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/queue/signature"
)

// signedBody is a body as a sender might sign it: members in an order that
// is not sorted, Go's HTML escaping of < and &, non-ASCII written raw, and
// numbers in forms that a decoder does not keep (1.0, an exponent).
const signedBody = `{"event_type":"prescription.created","event_id":"e1","data":{"note":"a \u003c b \u0026 café","dose":1.0,"qty":2.5e1,"path":"a/b"}}`

// pythonDumps is json.dumps(json.loads(signedBody)) with Python 3's
// defaults (", " and ": " separators, ensure_ascii), as python3 printed it.
const pythonDumps = `{"event_type": "prescription.created", "event_id": "e1", "data": {"note": "a < b & caf\u00e9", "dose": 1.0, "qty": 25.0, "path": "a/b"}}`

// expressBody is JSON.stringify(JSON.parse(signedBody)), which is what an
// Express handler re-serialising req.body sends on, as node printed it.
const expressBody = `{"event_type":"prescription.created","event_id":"e1","data":{"note":"a < b & café","dose":1,"qty":25,"path":"a/b"}}`

// goRemarshal is what a Go receiver gets by decoding the body into a map
// and calling json.Marshal: sorted members, float64 numbers.
func goRemarshal(t testing.TB, body string) string {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal([]byte(body), &v))
	out, err := json.Marshal(v)
	require.NoError(t, err)
	return string(out)
}

func TestDiagnose(t *testing.T) {
	t.Parallel()
	const current, previous = "whsec_current_secret", "whsec_previous_secret"
	sentAt := time.Unix(1767225600, 0)
	rotatedAt := sentAt.Add(-48 * time.Hour)
	secrets := []signature.Secret{
		{ID: "current", Value: current, Since: rotatedAt},
		{ID: "previous", Value: previous, RotatedOut: rotatedAt, SignsUntil: rotatedAt.Add(24 * time.Hour)},
	}
	good := signature.Header(sentAt, []byte(signedBody), current)
	sig := strings.TrimPrefix(good, "t=1767225600,v1=")
	// A delivery of the rotation's grace with its second v1 (the current
	// secret's) cut off.
	grace := signature.Header(rotatedAt.Add(time.Hour), []byte(signedBody), previous, current)
	graceFirstOnly := grace[:strings.LastIndex(grace, ",v1=")]
	tests := []struct {
		name     string
		header   string
		body     string
		local    bool // the signed bytes are unknown, as in rxgate listen
		now      time.Time
		verifies bool
		codes    []string
		classes  []string
		skew     int64
		secretID string
		message  string // a finding's message contains it
	}{
		{name: "verifies", header: good, body: signedBody, verifies: true,
			codes: []string{signature.CodeVerifies}, secretID: "current"},
		{name: "a Standard Webhooks signature", header: "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", body: signedBody,
			codes: []string{signature.CodeStandardScheme}, message: "webhook-timestamp"},
		{name: "a Standard Webhooks signature pasted with its name, during a rotation", header: "webhook-signature: v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE= v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", body: signedBody,
			codes: []string{signature.CodeStandardScheme}},
		{name: "verifies during a rotation's grace", header: signature.Header(sentAt, []byte(signedBody), previous, current), body: signedBody, verifies: true,
			codes: []string{signature.CodeVerifies}, secretID: "current"},
		{name: "Go json.Marshal of a decoded body", header: good, body: goRemarshal(t, signedBody),
			codes: []string{signature.CodeBodyDiffers}, classes: []string{signature.ClassMemberOrder, signature.ClassNumberFormat}},
		{name: "Python json.dumps defaults", header: good, body: pythonDumps,
			codes: []string{signature.CodeBodyDiffers}, classes: []string{signature.ClassWhitespace, signature.ClassEscaping, signature.ClassNumberFormat}},
		{name: "Express body parser re-serialised", header: good, body: expressBody,
			codes: []string{signature.CodeBodyDiffers}, classes: []string{signature.ClassEscaping, signature.ClassNumberFormat}},
		{name: "a trailing newline added by a framework", header: good, body: signedBody + "\n",
			codes: []string{signature.CodeBodyDiffers}, classes: []string{signature.ClassTrailingNewline}},
		{name: "another event's body", header: good, body: strings.Replace(signedBody, `"e1"`, `"e2"`, 1),
			codes: []string{signature.CodeBodyDiffers}, classes: []string{signature.ClassContent}},
		{name: "a body cut short", header: good, body: signedBody[:40],
			codes: []string{signature.CodeBodyDiffers}, classes: []string{signature.ClassTruncated}},
		{name: "a body that is not JSON", header: good, body: "event_type=prescription.created",
			codes: []string{signature.CodeBodyDiffers}, classes: []string{signature.ClassNotJSON}},
		{name: "a proxy joined two copies of the header", header: good + ", " + good, body: signedBody,
			codes: []string{signature.CodeHeaderJoined, signature.CodeSignatureValid}, secretID: "current"},
		{name: "a proxy split the header", header: "t=1767225600", body: signedBody,
			codes: []string{signature.CodeHeaderSplit}},
		{name: "the t was lost", header: "v1=" + sig, body: signedBody,
			codes: []string{signature.CodeHeaderSplit}},
		{name: "upper-cased", header: strings.ToUpper(good), body: signedBody,
			codes: []string{signature.CodeHeaderCaseChanged, signature.CodeSignatureValid}, secretID: "current"},
		{name: "t= stripped", header: "1767225600,v1=" + sig, body: signedBody,
			codes: []string{signature.CodeTimestampKeyMissing, signature.CodeSignatureValid}, secretID: "current"},
		{name: "v1= stripped", header: "t=1767225600," + sig, body: signedBody,
			codes: []string{signature.CodeSignatureKeyMissing, signature.CodeSignatureValid}, secretID: "current"},
		{name: "reordered", header: "v1=" + sig + ",t=1767225600", body: signedBody, verifies: true,
			codes: []string{signature.CodeHeaderReordered, signature.CodeVerifies}, secretID: "current"},
		{name: "a truncated v1", header: "t=1767225600,v1=" + sig[:40], body: signedBody,
			codes: []string{signature.CodeSignatureTruncated}},
		{name: "pasted with its name and quotes", header: signature.HeaderName + `: "` + good + `"`, body: signedBody,
			codes: []string{signature.CodeHeaderNameIncluded, signature.CodeHeaderQuoted, signature.CodeSignatureValid}, secretID: "current"},
		{name: "no header", header: " ", body: signedBody, codes: []string{signature.CodeHeaderMissing}},
		{name: "a malformed entry", header: good + ",junk", body: signedBody,
			codes: []string{signature.CodeHeaderMalformed, signature.CodeSignatureValid}, secretID: "current"},
		{name: "a receiver clock 10 minutes ahead", header: good, body: signedBody, now: sentAt.Add(10 * time.Minute),
			codes: []string{signature.CodeTimestampOutsideTolerance}, skew: 600},
		{name: "a receiver clock 10 minutes behind", header: good, body: signedBody, now: sentAt.Add(-10 * time.Minute),
			codes: []string{signature.CodeTimestampOutsideTolerance}, skew: -600},
		{name: "a rotated-out secret", header: signature.Header(sentAt, []byte(signedBody), previous), body: signedBody,
			codes: []string{signature.CodeSecretRotatedOut}, secretID: "previous"},
		{name: "a rotation's second v1 cut off", header: graceFirstOnly,
			body: signedBody, now: rotatedAt.Add(time.Hour), codes: []string{signature.CodeSecretRotatedOut}, secretID: "previous", message: "only the first arrived"},
		{name: "an unknown secret", header: signature.Header(sentAt, []byte(signedBody), "whsec_someone_else"), body: signedBody,
			codes: []string{signature.CodeSecretUnknown}},
		{name: "an unknown secret and a changed body", header: signature.Header(sentAt, []byte(signedBody), "whsec_someone_else"), body: expressBody,
			codes: []string{signature.CodeBodyDiffers, signature.CodeSecretUnknown}, classes: []string{signature.ClassEscaping, signature.ClassNumberFormat}},

		// Without the signed bytes, undoing a trailing newline or added
		// whitespace proves the change; other re-encodings leave hints.
		{name: "local: verifies", local: true, header: good, body: signedBody, verifies: true,
			codes: []string{signature.CodeVerifies}, secretID: "current"},
		{name: "local: a trailing newline", local: true, header: good, body: signedBody + "\n",
			codes: []string{signature.CodeBodyDiffers}, classes: []string{signature.ClassTrailingNewline}, secretID: "current"},
		{name: "local: indented", local: true, header: good, body: indent(t, signedBody),
			codes: []string{signature.CodeBodyDiffers}, classes: []string{signature.ClassWhitespace}, secretID: "current"},
		{name: "local: Python json.dumps", local: true, header: good, body: pythonDumps,
			codes: []string{signature.CodeBodyHints, signature.CodeSecretUnknown}, classes: []string{signature.ClassWhitespace, signature.ClassEscaping}},
		{name: "local: Express", local: true, header: good, body: expressBody,
			codes: []string{signature.CodeBodyHints, signature.CodeSecretUnknown}, classes: []string{signature.ClassEscaping}},
		{name: "local: Go json.Marshal sorts the members", local: true, header: good, body: goRemarshal(t, signedBody),
			codes: []string{signature.CodeBodyHints, signature.CodeSecretUnknown}, classes: []string{signature.ClassMemberOrder}},
		{name: "local: reformatted numbers leave no trace", local: true, header: good, body: strings.Replace(signedBody, "1.0", "1", 1),
			codes: []string{signature.CodeSecretUnknown}},
		{name: "local: a clock 10 minutes off", local: true, header: good, body: signedBody, now: sentAt.Add(10 * time.Minute),
			codes: []string{signature.CodeTimestampOutsideTolerance}, skew: 600},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			now := tt.now
			if now.IsZero() {
				now = sentAt.Add(5 * time.Second)
			}
			in := signature.Input{Header: tt.header, Body: []byte(tt.body), Signed: []byte(signedBody), Secrets: secrets, Now: now}
			if tt.local {
				in.Signed = nil
			}
			d := signature.Diagnose(in)
			var codes []string
			for _, f := range d.Findings {
				codes = append(codes, f.Code)
				assert.NotEmpty(t, f.Message)
				for _, s := range []string{current, previous} {
					assert.NotContains(t, f.Message, s, "a finding must never carry a secret")
				}
				switch f.Code {
				case signature.CodeBodyDiffers, signature.CodeBodyHints:
					assert.ElementsMatch(t, tt.classes, f.Classes, f.Message)
					if !tt.local {
						require.NotNil(t, f.Offset)
						assert.Equal(t, firstDiff(tt.body, signedBody), *f.Offset)
					}
				case signature.CodeTimestampOutsideTolerance:
					require.NotNil(t, f.SkewSeconds)
					assert.Equal(t, tt.skew, *f.SkewSeconds)
				}
				if tt.secretID != "" && f.SecretID != "" {
					assert.Equal(t, tt.secretID, f.SecretID, f.Message)
				}
			}
			for _, f := range d.Findings {
				t.Log(f.Code, f.Classes, f.Message)
			}
			assert.Equal(t, tt.codes, codes, "%+v", d.Findings)
			if tt.message != "" {
				assert.Contains(t, fmt.Sprint(d.Findings), tt.message)
			}
			assert.Equal(t, tt.verifies, d.Verifies)
			assert.Equal(t, tt.verifies, signature.Verify([]string{current}, tt.header, []byte(tt.body), now) == nil,
				"Diagnose and Verify agree")
		})
	}
}

func indent(t testing.TB, body string) string {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, json.Indent(&b, []byte(body), "", "  "))
	return b.String()
}

func firstDiff(a, b string) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return i
}

// TestDiagnoseExcerpt checks that the excerpts around the first
// difference show it.
func TestDiagnoseExcerpt(t *testing.T) {
	t.Parallel()
	now := time.Unix(1767225600, 0)
	d := signature.Diagnose(signature.Input{
		Header: signature.Header(now, []byte(signedBody), "k"), Body: []byte(expressBody), Signed: []byte(signedBody),
		Secrets: []signature.Secret{{ID: "current", Value: "k"}}, Now: now,
	})
	require.Len(t, d.Findings, 1)
	f := d.Findings[0]
	assert.Contains(t, f.ReceivedExcerpt, "a < b")
	assert.Contains(t, f.SignedExcerpt, `a \\u003c b`)
	assert.Contains(t, f.Message, "same JSON re-encoded")
}
