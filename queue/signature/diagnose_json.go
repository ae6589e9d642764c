package signature

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
)

// jsonDoc is a JSON document parsed for comparing encodings: it keeps
// what encoding/json throws away (member order, the raw text of strings
// and numbers, the whitespace between tokens).
type jsonDoc struct {
	root *jsonValue
	// layout is the whitespace between tokens, each run tagged with the
	// number of structural characters before it, trailing whitespace
	// left out: two encodings with the same layout space alike.
	layout string
	ws     bool
}

type jsonValue struct {
	kind byte // '{', '[', '"', '0' (number), 't', 'f', 'n'
	raw  string
	str  string
	keys []string
	vals []*jsonValue
}

type jsonParser struct {
	b      []byte
	pos    int
	tokens int
	layout strings.Builder
	ws     bool
	depth  int
}

var errNotJSON = errors.New("not json")

// parseJSON parses b, one value with optional whitespace around it.
func parseJSON(b []byte) (*jsonDoc, error) {
	p := &jsonParser{b: b}
	p.space()
	v, err := p.value()
	if err != nil {
		return nil, err
	}
	for p.pos < len(p.b) && isSpace(p.b[p.pos]) {
		p.pos++
	}
	if p.pos != len(p.b) {
		return nil, errNotJSON
	}
	return &jsonDoc{root: v, layout: p.layout.String(), ws: p.ws}, nil
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// space skips whitespace before a token, recording it.
func (p *jsonParser) space() {
	start := p.pos
	for p.pos < len(p.b) && isSpace(p.b[p.pos]) {
		p.pos++
	}
	if p.pos > start {
		p.ws = true
		fmt.Fprintf(&p.layout, "%d:%q;", p.tokens, p.b[start:p.pos])
	}
}

func (p *jsonParser) expect(c byte) bool {
	p.space()
	if p.pos < len(p.b) && p.b[p.pos] == c {
		p.pos++
		p.tokens++
		return true
	}
	return false
}

func (p *jsonParser) value() (*jsonValue, error) {
	p.depth++
	defer func() { p.depth-- }()
	if p.depth > 256 {
		return nil, errNotJSON
	}
	p.space()
	if p.pos >= len(p.b) {
		return nil, errNotJSON
	}
	switch c := p.b[p.pos]; {
	case c == '{':
		p.pos++
		p.tokens++
		v := &jsonValue{kind: '{'}
		if p.expect('}') {
			return v, nil
		}
		for {
			p.space()
			k, err := p.str()
			if err != nil {
				return nil, err
			}
			if !p.expect(':') {
				return nil, errNotJSON
			}
			val, err := p.value()
			if err != nil {
				return nil, err
			}
			v.keys, v.vals = append(v.keys, k.str), append(v.vals, val)
			if p.expect('}') {
				return v, nil
			}
			if !p.expect(',') {
				return nil, errNotJSON
			}
		}
	case c == '[':
		p.pos++
		p.tokens++
		v := &jsonValue{kind: '['}
		if p.expect(']') {
			return v, nil
		}
		for {
			val, err := p.value()
			if err != nil {
				return nil, err
			}
			v.vals = append(v.vals, val)
			if p.expect(']') {
				return v, nil
			}
			if !p.expect(',') {
				return nil, errNotJSON
			}
		}
	case c == '"':
		return p.str()
	default:
		start := p.pos
		for p.pos < len(p.b) && strings.IndexByte(",]}: \t\r\n", p.b[p.pos]) < 0 {
			p.pos++
		}
		raw := string(p.b[start:p.pos])
		switch raw {
		case "true", "false", "null":
			return &jsonValue{kind: raw[0], raw: raw}, nil
		}
		if !json.Valid([]byte(raw)) {
			return nil, errNotJSON
		}
		return &jsonValue{kind: '0', raw: raw}, nil
	}
}

// str reads a string literal, keeping its raw text and its value.
func (p *jsonParser) str() (*jsonValue, error) {
	if p.pos >= len(p.b) || p.b[p.pos] != '"' {
		return nil, errNotJSON
	}
	start := p.pos
	p.pos++
	for p.pos < len(p.b) {
		switch p.b[p.pos] {
		case '\\':
			p.pos += 2
			continue
		case '"':
			p.pos++
			raw := p.b[start:p.pos]
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return nil, errNotJSON
			}
			return &jsonValue{kind: '"', raw: string(raw), str: s}, nil
		}
		p.pos++
	}
	return nil, errNotJSON
}

// diffClasses names the classes of difference between r and s.
func diffClasses(r, s *jsonDoc) []string {
	found := map[string]bool{}
	diffValues(r.root, s.root, found)
	if r.layout != s.layout {
		found[ClassWhitespace] = true
	}
	var out []string
	for _, c := range []string{ClassContent, ClassMemberOrder, ClassWhitespace, ClassEscaping, ClassNumberFormat} {
		if found[c] {
			out = append(out, c)
		}
	}
	return out
}

func diffValues(r, s *jsonValue, found map[string]bool) {
	if r.kind != s.kind {
		found[ClassContent] = true
		return
	}
	switch r.kind {
	case '"':
		if r.str != s.str {
			found[ClassContent] = true
		} else if r.raw != s.raw {
			found[ClassEscaping] = true
		}
	case '0':
		if !sameNumber(r.raw, s.raw) {
			found[ClassContent] = true
		} else if r.raw != s.raw {
			found[ClassNumberFormat] = true
		}
	case '[':
		if len(r.vals) != len(s.vals) {
			found[ClassContent] = true
			return
		}
		for i := range r.vals {
			diffValues(r.vals[i], s.vals[i], found)
		}
	case '{':
		if len(r.keys) != len(s.keys) {
			found[ClassContent] = true
			return
		}
		for i, k := range r.keys {
			j := indexOf(s.keys, k)
			if j < 0 {
				found[ClassContent] = true
				return
			}
			if i != j {
				found[ClassMemberOrder] = true
			}
			diffValues(r.vals[i], s.vals[j], found)
		}
	}
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

// sameNumber compares two JSON numbers exactly.
func sameNumber(a, b string) bool {
	x, ok1 := new(big.Rat).SetString(a)
	y, ok2 := new(big.Rat).SetString(b)
	return ok1 && ok2 && x.Cmp(y) == 0
}

// firstDiff says where r's content first differs from s's, as a path.
func (d *jsonDoc) firstDiff(s *jsonDoc, path string) string {
	if p := firstDiff(d.root, s.root, path); p != "" {
		return p
	}
	return "at " + path
}

func firstDiff(r, s *jsonValue, path string) string {
	switch {
	case r.kind != s.kind:
		return "at " + path + " a different kind of value"
	case r.kind == '"' && r.str != s.str, r.kind == '0' && !sameNumber(r.raw, s.raw),
		r.kind != '"' && r.kind != '0' && r.kind != '[' && r.kind != '{' && r.raw != s.raw:
		return fmt.Sprintf("at %s %s where %s was signed", path, short(r.raw), short(s.raw))
	case r.kind == '[':
		if len(r.vals) != len(s.vals) {
			return fmt.Sprintf("at %s %d elements where %d were signed", path, len(r.vals), len(s.vals))
		}
		for i := range r.vals {
			if p := firstDiff(r.vals[i], s.vals[i], path+"["+strconv.Itoa(i)+"]"); p != "" {
				return p
			}
		}
	case r.kind == '{':
		for i, k := range r.keys {
			j := indexOf(s.keys, k)
			if j < 0 {
				return fmt.Sprintf("at %s a member %s that was not signed", path, excerptString(k))
			}
			if p := firstDiff(r.vals[i], s.vals[j], path+"."+k); p != "" {
				return p
			}
		}
		for _, k := range s.keys {
			if indexOf(r.keys, k) < 0 {
				return fmt.Sprintf("at %s no member %s, which was signed", path, excerptString(k))
			}
		}
	}
	return ""
}

// foreignEscapes describes the first string escape Go's encoding/json
// would not have written, or a raw <, > or & it would have escaped; ""
// when there is none.
func (d *jsonDoc) foreignEscapes() string {
	var out string
	var walk func(v *jsonValue)
	walk = func(v *jsonValue) {
		if out != "" {
			return
		}
		switch v.kind {
		case '"':
			out = foreignEscape(v.raw)
		case '{':
			for _, e := range v.vals {
				walk(e)
			}
		case '[':
			for _, e := range v.vals {
				walk(e)
			}
		}
	}
	walk(d.root)
	return out
}

func foreignEscape(raw string) string {
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case c == '<' || c == '>' || c == '&':
			return fmt.Sprintf("a raw %q where Go's encoding writes \\u00%x", c, c)
		case c == '\\' && i+1 < len(raw):
			n := raw[i+1]
			if n == '/' {
				return `an escaped "\/" where Go's encoding writes "/"`
			}
			if n == 'u' && i+6 <= len(raw) {
				code, err := strconv.ParseUint(raw[i+2:i+6], 16, 32)
				r := rune(code)
				if err == nil && r >= 0x20 && r != '<' && r != '>' && r != '&' && r != 0x2028 && r != 0x2029 && r != '"' && r != '\\' {
					return fmt.Sprintf("an escape %s where Go's encoding writes the character itself (ensure_ascii-style escaping)", raw[i:i+6])
				}
			}
			i++
		}
	}
	return ""
}

// short cuts a raw JSON token to a readable length.
func short(raw string) string {
	if len(raw) > 24 {
		return raw[:24] + "…"
	}
	return raw
}
