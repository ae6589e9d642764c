package signature

import (
	"bytes"
	"crypto/hmac"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The codes of the findings Diagnose reports. They are stable: clients
// may switch on them.
const (
	// CodeVerifies: a v1 signs the received body with the current
	// secret, within the tolerance.
	CodeVerifies = "verifies"
	// CodeSignatureValid: a v1 signs the received body with the current
	// secret, but the header as received does not parse.
	CodeSignatureValid = "signature_valid"
	// CodeHeaderMissing: no header value was given.
	CodeHeaderMissing = "header_missing"
	// CodeHeaderMalformed: an entry of the header is neither t=<digits>
	// nor v1=<64 hex digits>.
	CodeHeaderMalformed = "header_malformed"
	// CodeHeaderNameIncluded: the value starts with the header's name
	// (pasted whole); the rest is diagnosed.
	CodeHeaderNameIncluded = "header_name_included"
	// CodeHeaderQuoted: the value is wrapped in quotes.
	CodeHeaderQuoted = "header_quoted"
	// CodeHeaderJoined: the value holds more than one t, as when a proxy
	// joins two copies of the header with ", ".
	CodeHeaderJoined = "header_joined"
	// CodeHeaderSplit: the value holds a t without any v1, or v1 without a
	// t, as when a proxy splits it at its commas and passes one part.
	CodeHeaderSplit = "header_split"
	// CodeHeaderCaseChanged: keys or hex digits are not lower case.
	CodeHeaderCaseChanged = "header_case_changed"
	// CodeHeaderReordered: the entries are not in the order sent (t
	// first); Parse accepts it, a receiver that reads by position may not.
	CodeHeaderReordered = "header_reordered"
	// CodeTimestampKeyMissing: a bare number stands where t=<number> was.
	CodeTimestampKeyMissing = "timestamp_key_missing"
	// CodeSignatureKeyMissing: a bare 64-hex-digit value stands where
	// v1=<hex> was.
	CodeSignatureKeyMissing = "signature_key_missing"
	// CodeSignatureTruncated: a v1 is shorter than 64 hex digits.
	CodeSignatureTruncated = "signature_truncated"
	// CodeTimestampOutsideTolerance: t is more than the tolerance away
	// from the receiver's clock.
	CodeTimestampOutsideTolerance = "timestamp_outside_tolerance"
	// CodeSecretRotatedOut: a v1 was made with a secret that has since
	// been replaced.
	CodeSecretRotatedOut = "secret_rotated_out"
	// CodeSecretUnknown: no v1 was made with any secret known, over either
	// the received or the signed bytes.
	CodeSecretUnknown = "secret_unknown"
	// CodeBodyDiffers: the received body is not the bytes signed.
	CodeBodyDiffers = "body_differs"
	// CodeBodyHints: the signed bytes are unknown (a local diagnosis) and
	// the received body shows signs of having been re-encoded.
	CodeBodyHints = "body_reencoding_hints"
	// CodeStandardScheme: the value is a Standard Webhooks
	// webhook-signature (v1,<base64>), not X-Webhook-Signature. It cannot
	// be checked from it alone: it signs webhook-id and webhook-timestamp
	// too; VerifyStandard checks the three headers.
	CodeStandardScheme = "standard_scheme_header"
)

// The classes of difference a body_differs (or body_reencoding_hints)
// finding names: a final newline or whitespace, members reordered, strings
// escaped otherwise (\u003c against <, \/, \u00e9 against é), numbers
// written otherwise (1.0 against 1, 2.5e1 against 25), different content,
// a body that is not JSON, or one cut short.
const (
	ClassTrailingNewline = "trailing_newline"
	ClassWhitespace      = "whitespace"
	ClassMemberOrder     = "member_order"
	ClassEscaping        = "escaping"
	ClassNumberFormat    = "number_format"
	ClassContent         = "content"
	ClassNotJSON         = "not_json"
	ClassTruncated       = "truncated"
)

// Secret is one secret a delivery may have been signed with, with its
// history. ID names it in findings; the secret itself never appears in
// one.
type Secret struct {
	// ID names the secret in findings, e.g. "current" or "previous".
	ID string
	// Value is the secret.
	Value string
	// Since is when the secret began signing; zero when unknown.
	Since time.Time
	// RotatedOut is when a rotation replaced it; zero while it is the
	// current secret.
	RotatedOut time.Time
	// SignsUntil is when deliveries stopped carrying its signature (the
	// end of the rotation's grace); zero while it is the current secret.
	SignsUntil time.Time
}

func (s Secret) describe() string {
	if s.RotatedOut.IsZero() {
		if s.Since.IsZero() {
			return fmt.Sprintf("the %s secret", s.ID)
		}
		return fmt.Sprintf("the %s secret (in use since %s)", s.ID, stamp(s.Since))
	}
	return fmt.Sprintf("the %s secret (replaced by a rotation at %s; deliveries carried its signature until %s)",
		s.ID, stamp(s.RotatedOut), stamp(s.SignsUntil))
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// Input is what a diagnosis starts from: what the receiver saw, what was
// signed when known, and the secrets.
type Input struct {
	// Header is the X-Webhook-Signature value the receiver saw.
	Header string
	// Body is the body the receiver verified.
	Body []byte
	// Signed is the body rxgate signed; nil when unknown (a receiver's
	// local diagnosis), which limits what can be said about the body.
	Signed []byte
	// Secrets are the secrets to try, the current one first.
	Secrets []Secret
	// Now is the receiver's clock.
	Now time.Time
	// Tolerance is the timestamp tolerance; 0 means Tolerance.
	Tolerance time.Duration
}

// Finding is one conclusion of a diagnosis: a stable code, a sentence,
// and the details that apply.
type Finding struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// SecretID names the secret concerned.
	SecretID string `json:"secret_id,omitempty"`
	// SkewSeconds is the receiver's clock minus t: positive when t is in
	// the receiver's past.
	SkewSeconds *int64 `json:"skew_seconds,omitempty"`
	// Offset is the first byte at which the received body differs from
	// the signed one.
	Offset *int `json:"offset,omitempty"`
	// ReceivedExcerpt and SignedExcerpt are the bytes around Offset,
	// quoted.
	ReceivedExcerpt string `json:"received_excerpt,omitempty"`
	SignedExcerpt   string `json:"signed_excerpt,omitempty"`
	// Classes name the kinds of difference found (Class values).
	Classes []string `json:"classes,omitempty"`
}

// Diagnosis is the outcome of Diagnose.
type Diagnosis struct {
	// Verifies is true when a v1 signs the received body with the
	// current secret within the tolerance.
	Verifies bool      `json:"verifies"`
	Findings []Finding `json:"findings"`
}

// headerShape is a header read leniently: every t and v1 it holds, and
// what was wrong with it.
type headerShape struct {
	timestamps []int64
	sigs       [][]byte
	truncated  []string
	findings   []Finding
}

func readHeader(h string) headerShape {
	var s headerShape
	h = strings.TrimSpace(h)
	if name, rest, ok := strings.Cut(h, ":"); ok && strings.EqualFold(strings.TrimSpace(name), HeaderName) {
		h = strings.TrimSpace(rest)
		s.findings = append(s.findings, Finding{Code: CodeHeaderNameIncluded,
			Message: "The value starts with the header's name; only what follows \"" + HeaderName + ":\" is the value."})
	}
	if len(h) >= 2 && (h[0] == '"' && h[len(h)-1] == '"' || h[0] == '\'' && h[len(h)-1] == '\'') {
		h = h[1 : len(h)-1]
		s.findings = append(s.findings, Finding{Code: CodeHeaderQuoted,
			Message: "The value is wrapped in quotes; the header is sent without them."})
	}
	if h == "" {
		s.findings = append(s.findings, Finding{Code: CodeHeaderMissing,
			Message: "No " + HeaderName + " value was given: the header may have been dropped on the way."})
		return s
	}
	if len(h) > maxHeaderLen {
		h = h[:maxHeaderLen]
	}
	var caseChanged, bareT, bareV1 bool
	first := ""
	for i, part := range strings.Split(h, ",") {
		part = strings.TrimSpace(part)
		key, value, ok := strings.Cut(part, "=")
		if !ok {
			if ts, err := parseTimestamp(part); err == nil {
				s.timestamps = append(s.timestamps, ts)
				bareT = true
				key = "t"
			} else if len(part) == 64 && isHex(part) {
				key, value, bareV1 = "v1", part, true
			} else {
				s.findings = append(s.findings, Finding{Code: CodeHeaderMalformed,
					Message: fmt.Sprintf("Entry %d (%s) is not key=value.", i+1, excerptString(part))})
				continue
			}
		}
		if key != strings.ToLower(key) {
			caseChanged = true
			key = strings.ToLower(key)
		}
		if i == 0 {
			first = key
		}
		switch key {
		case "t":
			if ok {
				ts, err := parseTimestamp(value)
				if err != nil {
					s.findings = append(s.findings, Finding{Code: CodeHeaderMalformed,
						Message: fmt.Sprintf("t=%s is not a number of seconds.", excerptString(value))})
					continue
				}
				s.timestamps = append(s.timestamps, ts)
			}
		case "v1":
			if value != strings.ToLower(value) {
				caseChanged = true
			}
			v := strings.ToLower(value)
			switch {
			case !isHex(v):
				s.findings = append(s.findings, Finding{Code: CodeHeaderMalformed,
					Message: fmt.Sprintf("v1=%s is not hex digits.", excerptString(value))})
			case len(v) < 64:
				s.truncated = append(s.truncated, v)
			case len(v) > 64:
				s.findings = append(s.findings, Finding{Code: CodeHeaderMalformed,
					Message: fmt.Sprintf("A v1 has %d hex digits, not 64: two values may have run together.", len(v))})
			default:
				sig, _ := hex.DecodeString(v)
				s.sigs = append(s.sigs, sig)
			}
		}
	}
	if bareT {
		s.findings = append(s.findings, Finding{Code: CodeTimestampKeyMissing,
			Message: "The timestamp stands without its \"t=\": something on the way rewrote the header."})
	}
	if bareV1 {
		s.findings = append(s.findings, Finding{Code: CodeSignatureKeyMissing,
			Message: "A signature stands without its \"v1=\": something on the way rewrote the header."})
	}
	if caseChanged {
		s.findings = append(s.findings, Finding{Code: CodeHeaderCaseChanged,
			Message: "Keys or hex digits are not in lower case as sent: a receiver comparing strings fails; compare the decoded bytes, or lower-case first."})
	}
	if first != "" && first != "t" && len(s.timestamps) > 0 {
		s.findings = append(s.findings, Finding{Code: CodeHeaderReordered,
			Message: "The entries are not in the order sent (t first): a receiver reading them by position fails; read them by key."})
	}
	if len(s.timestamps) > 1 {
		s.findings = append(s.findings, Finding{Code: CodeHeaderJoined,
			Message: fmt.Sprintf("The value holds %d timestamps: two copies of the header were joined with \", \" on the way (a proxy or framework merging repeated headers). Verify with one of them.", len(s.timestamps))})
	}
	if len(s.timestamps) > 0 && len(s.sigs)+len(s.truncated) == 0 {
		s.findings = append(s.findings, Finding{Code: CodeHeaderSplit,
			Message: "The value holds a timestamp but no v1: it was split at its commas on the way and only the first part arrived."})
	}
	if len(s.timestamps) == 0 && len(s.sigs)+len(s.truncated) > 0 {
		s.findings = append(s.findings, Finding{Code: CodeHeaderSplit,
			Message: "The value holds v1 signatures but no t: it was split or cut on the way and the timestamp was lost."})
	}
	s.timestamps = dedupe(s.timestamps)
	return s
}

// isStandardValue reports whether h is a Standard Webhooks
// webhook-signature value, its name pasted with it or not: space-separated
// <version>,<base64> entries, a v1 among them.
func isStandardValue(h string) bool {
	h = strings.TrimSpace(h)
	if name, rest, ok := strings.Cut(h, ":"); ok && strings.EqualFold(strings.TrimSpace(name), StandardSignatureHeader) {
		h = rest
	}
	fields := strings.Fields(h)
	v1 := false
	for _, f := range fields {
		version, value, ok := strings.Cut(f, ",")
		if !ok || len(version) < 2 || version[0] != 'v' || strings.TrimRight(value, "=") == "" {
			return false
		}
		for _, c := range []byte(strings.TrimRight(value, "=")) {
			if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/') {
				return false
			}
		}
		v1 = v1 || version == "v1"
	}
	return v1
}

func isHex(s string) bool {
	for _, c := range []byte(s) {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return s != ""
}

func dedupe(ts []int64) []int64 {
	var out []int64
	for _, t := range ts {
		seen := false
		for _, o := range out {
			seen = seen || o == t
		}
		if !seen {
			out = append(out, t)
		}
	}
	return out
}

// match is a v1 made with secret over body at t.
type match struct {
	secret int
	t      int64
}

// find returns the first (secret, t) whose MAC over body is one of sigs,
// trying secrets in order.
func find(secrets []Secret, ts []int64, sigs [][]byte, body []byte) (match, bool) {
	for i, s := range secrets {
		for _, t := range ts {
			want := mac(s.Value, t, body)
			for _, got := range sigs {
				if hmac.Equal(want, got) {
					return match{i, t}, true
				}
			}
		}
	}
	return match{}, false
}

// Diagnose says why in.Header does or does not verify in.Body: each
// problem found is one Finding. It never includes a secret.
func Diagnose(in Input) Diagnosis {
	tol := in.Tolerance
	if tol <= 0 {
		tol = Tolerance
	}
	if isStandardValue(in.Header) {
		return Diagnosis{Findings: []Finding{{Code: CodeStandardScheme,
			Message: "This is a Standard Webhooks webhook-signature value (v1,<base64>), not " + HeaderName + ": the endpoint signs with the standard scheme. " +
				"Verify it with the whsec_ secret over \"<webhook-id>.<webhook-timestamp>.<body>\" (signature.VerifyStandard, or any Standard Webhooks library); " +
				"it cannot be diagnosed from this value alone, since it also signs the webhook-id and webhook-timestamp headers."}}}
	}
	h := readHeader(in.Header)
	d := Diagnosis{Findings: h.findings}
	add := func(f Finding) { d.Findings = append(d.Findings, f) }

	m, ok := find(in.Secrets, h.timestamps, h.sigs, in.Body)
	bodyOK := ok
	if !ok && in.Signed != nil && !bytes.Equal(in.Signed, in.Body) {
		m, ok = find(in.Secrets, h.timestamps, h.sigs, in.Signed)
	}
	// A truncated v1 still tells which secret made it: the value it
	// should have starts with its digits.
	for _, tr := range h.truncated {
		var which string
		for _, body := range [][]byte{in.Body, in.Signed} {
			for _, s := range in.Secrets {
				for _, t := range h.timestamps {
					if body != nil && which == "" && strings.HasPrefix(Compute(s.Value, t, body), tr) {
						which = " It is the start of " + s.describe() + "'s signature: the rest was cut off on the way."
					}
				}
			}
		}
		add(Finding{Code: CodeSignatureTruncated,
			Message: fmt.Sprintf("A v1 has %d hex digits, not 64.%s", len(tr), which)})
	}

	if ok {
		s := in.Secrets[m.secret]
		if !s.RotatedOut.IsZero() {
			msg := "The signature was made with " + s.describe() + ": a receiver holding only the current secret rejects it; verify with the current secret, or, for an old delivery, ask for a replay, which is signed with the current one."
			if len(h.sigs) == 1 && m.t >= s.RotatedOut.Unix() && m.t < s.SignsUntil.Unix() {
				msg += " It was sent during the rotation's grace, when deliveries carry two v1, the current secret's second: only the first arrived, so the header was cut on the way."
			}
			add(Finding{Code: CodeSecretRotatedOut, SecretID: s.ID, Message: msg})
		}
		if f, bad := skew(in.Now, m.t, tol, true); bad {
			add(f)
		}
	} else if len(h.timestamps) > 0 {
		if f, bad := skew(in.Now, h.timestamps[0], tol, false); bad {
			add(f)
		}
	}

	switch {
	case bodyOK:
	case in.Signed != nil && !bytes.Equal(in.Signed, in.Body):
		add(compareBodies(in.Body, in.Signed))
	case in.Signed == nil && len(h.sigs) > 0:
		if f, found := repair(in, h); found {
			add(f)
			ok = true
		} else if f, found := hints(in.Body); found {
			add(f)
		}
	}
	if !ok && len(h.sigs) > 0 && len(h.timestamps) > 0 {
		msg := "No v1 was made with " + secretList(in.Secrets)
		if in.Signed != nil {
			msg += ", over the received bytes or over the bytes signed"
		}
		msg += ": the header was signed with another secret (another endpoint's, or one older than those kept: only the current and the previous secret are kept), or its t was changed."
		if in.Signed == nil {
			msg += " The body may also differ from what was signed; that cannot be told here without the signed bytes."
		}
		add(Finding{Code: CodeSecretUnknown, Message: msg})
	}

	if bodyOK && in.Secrets[m.secret].RotatedOut.IsZero() {
		s := in.Secrets[m.secret]
		var current []string
		for _, c := range in.Secrets {
			if c.RotatedOut.IsZero() {
				current = append(current, c.Value)
			}
		}
		// Verifies is Verify's answer, so that the diagnosis never
		// disagrees with a receiver using this package.
		d.Verifies = VerifyTolerance(current, in.Header, in.Body, in.Now, tol) == nil
		switch {
		case d.Verifies:
			add(Finding{Code: CodeVerifies, SecretID: s.ID,
				Message: "The signature verifies with " + s.describe() + " over the body received, within the tolerance. A receiver that rejects it holds another secret, or verifies other bytes than the raw body."})
		case !hasCode(d.Findings, CodeTimestampOutsideTolerance):
			add(Finding{Code: CodeSignatureValid, SecretID: s.ID,
				Message: "A v1 was made with " + s.describe() + " over the body received: what fails is the header's shape (see the other findings); the header as sent verifies."})
		}
	}
	if d.Findings == nil {
		d.Findings = []Finding{}
	}
	return d
}

func secretList(secrets []Secret) string {
	if len(secrets) == 0 {
		return "any secret (none given)"
	}
	ids := make([]string, len(secrets))
	for i, s := range secrets {
		ids[i] = s.ID
	}
	return "the " + strings.Join(ids, " or the ") + " secret"
}

// skew reports t outside tol of now.
func skew(now time.Time, t int64, tol time.Duration, authentic bool) (Finding, bool) {
	d := now.Unix() - t
	if d >= -int64(tol/time.Second) && d <= int64(tol/time.Second) {
		return Finding{}, false
	}
	var msg string
	if d > 0 {
		msg = fmt.Sprintf("The timestamp t=%d is %d s before the receiver's clock (%s), %d s beyond the %d s tolerance: the receiver's clock is ahead, or the delivery is an old one being replayed.",
			t, d, stamp(now), d-int64(tol/time.Second), int64(tol/time.Second))
	} else {
		msg = fmt.Sprintf("The timestamp t=%d is %d s after the receiver's clock (%s), %d s beyond the %d s tolerance: the receiver's clock is behind.",
			t, -d, stamp(now), -d-int64(tol/time.Second), int64(tol/time.Second))
	}
	if !authentic {
		msg += " No signature verifies, so t may not be the one sent."
	}
	return Finding{Code: CodeTimestampOutsideTolerance, Message: msg, SkewSeconds: &d}, true
}

// repair tries, without the signed bytes, the undoings of common changes:
// a trailing newline, whitespace added by a re-encoding. One that makes a
// v1 verify proves what changed.
func repair(in Input, h headerShape) (Finding, bool) {
	trimmed := bytes.TrimRight(in.Body, "\r\n")
	var compact bytes.Buffer
	_ = json.Compact(&compact, trimmed)
	tries := []struct {
		body    []byte
		classes []string
		what    string
	}{
		{trimmed, []string{ClassTrailingNewline}, "with the trailing newline removed"},
		{compact.Bytes(), []string{ClassWhitespace}, "with the whitespace between JSON tokens removed"},
	}
	if len(trimmed) != len(in.Body) {
		tries[1].classes = append(tries[1].classes, ClassTrailingNewline)
	}
	for _, try := range tries {
		if len(try.body) == 0 || bytes.Equal(try.body, in.Body) {
			continue
		}
		if m, ok := find(in.Secrets, h.timestamps, h.sigs, try.body); ok {
			return Finding{Code: CodeBodyDiffers, SecretID: in.Secrets[m.secret].ID, Classes: try.classes,
				Message: "The body differs from what the signature covers: it verifies " + try.what + ", with " + in.Secrets[m.secret].describe() + ". Verify the raw body as received, before any framework parses or rewrites it."}, true
		}
	}
	return Finding{}, false
}

// hints looks, without the signed bytes, for what rxgate's encoding never
// writes (Go's encoding/json, compact, the envelope's members in spec
// order): whitespace between tokens, a trailing newline, event_type
// other than first, a raw <, > or &, an escaped /, or a \u escape of a
// character that needs none. A re-encoding that leaves none of these
// (numbers reformatted, say) cannot be told without the signed bytes.
func hints(body []byte) (Finding, bool) {
	v, err := parseJSON(body)
	if err != nil {
		return Finding{Code: CodeBodyHints, Classes: []string{ClassNotJSON},
			Message: "The body received is not JSON, which every delivery is: it was changed on the way, or is not the body of a delivery."}, true
	}
	var classes []string
	var notes []string
	if bytes.HasSuffix(body, []byte("\n")) {
		classes = append(classes, ClassTrailingNewline)
		notes = append(notes, "it ends with a newline")
	}
	if v.ws {
		classes = append(classes, ClassWhitespace)
		notes = append(notes, "it has whitespace between tokens")
	}
	// Every rxgate event starts with event_type (spec 6.2's envelope);
	// a decoder's map, re-encoded, sorts it elsewhere.
	if r := v.root; r.kind == '{' && indexOf(r.keys, "event_type") > 0 {
		classes = append(classes, ClassMemberOrder)
		notes = append(notes, "event_type is not its first member")
	}
	if esc := v.foreignEscapes(); esc != "" {
		classes = append(classes, ClassEscaping)
		notes = append(notes, esc)
	}
	if len(classes) == 0 {
		return Finding{}, false
	}
	return Finding{Code: CodeBodyHints, Classes: classes,
		Message: "The body looks re-encoded: " + strings.Join(notes, "; ") + ", which rxgate's encoding (compact, as Go's encoding/json writes) never does. Verify the raw body as received, before any framework parses it."}, true
}

// compareBodies says where and how received differs from signed.
func compareBodies(received, signed []byte) Finding {
	off := 0
	for off < len(received) && off < len(signed) && received[off] == signed[off] {
		off++
	}
	f := Finding{Code: CodeBodyDiffers, Offset: &off,
		ReceivedExcerpt: excerpt(received, off), SignedExcerpt: excerpt(signed, off)}
	var classes []string
	var why string
	if bytes.Equal(bytes.TrimRight(received, " \t\r\n"), signed) {
		classes, why = []string{ClassTrailingNewline}, "The body received is the bytes signed with whitespace or a newline added at the end (by a framework or a tool that writes the body with a final newline)."
	} else if off == len(received) {
		classes, why = []string{ClassTruncated}, fmt.Sprintf("The body received is the first %d of the %d bytes signed: it was cut short.", len(received), len(signed))
	} else {
		r, rerr := parseJSON(received)
		s, serr := parseJSON(signed)
		switch {
		case rerr != nil:
			classes, why = []string{ClassNotJSON}, "The body received is not JSON, and the bytes signed are: it was changed on the way."
		case serr != nil:
			classes, why = []string{ClassContent}, "The bytes signed are not JSON; the body received differs from them."
		default:
			classes = diffClasses(r, s)
			if bytes.HasSuffix(received, []byte("\n")) && !bytes.HasSuffix(signed, []byte("\n")) {
				classes = append(classes, ClassTrailingNewline)
			}
			if len(classes) == 0 {
				classes = []string{ClassWhitespace}
			}
			if contains(classes, ClassContent) {
				why = "The body received is different JSON from the bytes signed (" + r.firstDiff(s, "$") + "): it is another event's body, or was edited."
			} else {
				why = "The body received is the same JSON re-encoded (" + strings.Join(classes, ", ") + "): a framework parsed the body and serialised it again. Verify the raw body as received, before any parsing."
			}
		}
	}
	f.Classes = classes
	f.Message = fmt.Sprintf("The body differs from the bytes signed at offset %d (received %s, signed %s). %s", off, f.ReceivedExcerpt, f.SignedExcerpt, why)
	return f
}

func hasCode(fs []Finding, code string) bool {
	for _, f := range fs {
		if f.Code == code {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// excerpt quotes up to 16 bytes either side of off.
func excerpt(b []byte, off int) string {
	lo, hi := max(off-16, 0), min(off+16, len(b))
	if lo > hi {
		lo = hi
	}
	return strconv.Quote(string(b[lo:hi]))
}

func excerptString(s string) string {
	if len(s) > 24 {
		s = s[:24] + "…"
	}
	return strconv.Quote(s)
}
