// Package openapi holds rxgate's OpenAPI 3.0.3 documents: one for the
// partner API (partner.yaml) and one for the operator API (admin.yaml).
// The YAML files are the source of truth; they are embedded in the binary
// and served as JSON by the app, and the testsuite validates every request
// and response it exchanges against them.
//
// The documents name the default listeners (http://127.0.0.1:8080/external
// and http://127.0.0.1:8081) as their servers; Partner and Admin replace
// those with the URLs of the running instance.
package openapi

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"
)

// The server URLs the documents are written with: the default listeners.
const (
	// DefaultBaseURL is the partner document's server: {base_url} of an
	// instance with the default http.listen and http.base_path.
	DefaultBaseURL = "http://127.0.0.1:8080/external"
	// DefaultPartnerRoot is the server of the partner listener's root
	// paths (health, readiness, JWKS).
	DefaultPartnerRoot = "http://127.0.0.1:8080"
	// DefaultAdminURL is the operator document's server.
	DefaultAdminURL = "http://127.0.0.1:8081"
)

var (
	//go:embed partner.yaml
	partnerYAML []byte
	//go:embed admin.yaml
	adminYAML []byte
)

// PartnerYAML returns the partner document as written.
func PartnerYAML() []byte { return bytes.Clone(partnerYAML) }

// AdminYAML returns the operator document as written.
func AdminYAML() []byte { return bytes.Clone(adminYAML) }

var (
	partnerNode = sync.OnceValues(func() (*yaml.Node, error) { return parse("partner.yaml", partnerYAML) })
	adminNode   = sync.OnceValues(func() (*yaml.Node, error) { return parse("admin.yaml", adminYAML) })
)

// Partner returns the partner document as JSON, its server URLs pointing
// at baseURL (the instance's {base_url}) and root (the partner listener's
// root, where /healthz lives). Empty arguments keep the defaults.
func Partner(baseURL, root string) ([]byte, error) {
	return PartnerFor(baseURL, root, DefaultMaxBulkDrugs)
}

// DefaultMaxBulkDrugs is the bulk custom drug create's array limit as the
// partner document states it (http.max_bulk_drugs' default).
const DefaultMaxBulkDrugs = 2000

// PartnerFor is Partner for an instance whose bulk custom drug create
// takes at most maxBulkDrugs items (http.max_bulk_drugs): the document's
// maxItems and the descriptions that state the limit say so.
func PartnerFor(baseURL, root string, maxBulkDrugs int) ([]byte, error) {
	n, err := partnerNode()
	if maxBulkDrugs != DefaultMaxBulkDrugs {
		src := bytes.ReplaceAll(partnerYAML, []byte("maxItems: 2000"), fmt.Appendf(nil, "maxItems: %d", maxBulkDrugs))
		src = bytes.ReplaceAll(src, []byte("at most 2000 items"), fmt.Appendf(nil, "at most %d items", maxBulkDrugs))
		n, err = parse("partner.yaml", src)
	}
	if err != nil {
		return nil, err
	}
	return render(n, replacements(map[string]string{DefaultBaseURL: baseURL, DefaultPartnerRoot: root}))
}

// Admin returns the operator document as JSON, its server URL pointing at
// adminURL (the operator listener's root). Empty keeps the default.
func Admin(adminURL string) ([]byte, error) {
	n, err := adminNode()
	if err != nil {
		return nil, err
	}
	return render(n, replacements(map[string]string{DefaultAdminURL: adminURL}))
}

func replacements(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for from, to := range m {
		if to = strings.TrimRight(to, "/"); to != "" {
			out[from] = to
		}
	}
	return out
}

func parse(name string, src []byte) (*yaml.Node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, fmt.Errorf("openapi: %s: %w", name, err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("openapi: %s: not a YAML mapping", name)
	}
	return doc.Content[0], nil
}

// render encodes the YAML tree as JSON, keeping the order of members as
// written. servers replaces the url of server objects (members of a
// "servers" list) that equal a key.
func render(n *yaml.Node, servers map[string]string) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(len(partnerYAML))
	e := encoder{buf: &buf, servers: servers}
	if err := e.node(n, false); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

type encoder struct {
	buf     *bytes.Buffer
	servers map[string]string
}

// node writes n; inServer says n is a server object, whose url may be
// replaced.
func (e *encoder) node(n *yaml.Node, inServer bool) error {
	switch n.Kind {
	case yaml.AliasNode:
		return e.node(n.Alias, inServer)
	case yaml.MappingNode:
		e.buf.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				return fmt.Errorf("openapi: line %d: mapping keys must be scalars", k.Line)
			}
			if k.Value == "<<" {
				return fmt.Errorf("openapi: line %d: merge keys are not supported", k.Line)
			}
			if i > 0 {
				e.buf.WriteByte(',')
			}
			writeString(e.buf, k.Value)
			e.buf.WriteByte(':')
			if inServer && k.Value == "url" && v.Kind == yaml.ScalarNode {
				if to, ok := e.servers[v.Value]; ok {
					writeString(e.buf, to)
					continue
				}
			}
			if k.Value == "servers" && v.Kind == yaml.SequenceNode {
				if err := e.seq(v, true); err != nil {
					return err
				}
				continue
			}
			if err := e.node(v, false); err != nil {
				return err
			}
		}
		e.buf.WriteByte('}')
		return nil
	case yaml.SequenceNode:
		return e.seq(n, false)
	case yaml.ScalarNode:
		return e.scalar(n)
	}
	return fmt.Errorf("openapi: line %d: unexpected YAML node", n.Line)
}

func (e *encoder) seq(n *yaml.Node, servers bool) error {
	e.buf.WriteByte('[')
	for i, item := range n.Content {
		if i > 0 {
			e.buf.WriteByte(',')
		}
		if err := e.node(item, servers); err != nil {
			return err
		}
	}
	e.buf.WriteByte(']')
	return nil
}

func (e *encoder) scalar(n *yaml.Node) error {
	switch n.ShortTag() {
	case "!!str", "!!binary", "!!timestamp":
		writeString(e.buf, n.Value)
	case "!!null":
		e.buf.WriteString("null")
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return fmt.Errorf("openapi: line %d: %w", n.Line, err)
		}
		e.buf.WriteString(strconv.FormatBool(b))
	case "!!int":
		var i int64
		if err := n.Decode(&i); err != nil {
			return fmt.Errorf("openapi: line %d: %w", n.Line, err)
		}
		e.buf.WriteString(strconv.FormatInt(i, 10))
	case "!!float":
		var f float64
		if err := n.Decode(&f); err != nil {
			return fmt.Errorf("openapi: line %d: %w", n.Line, err)
		}
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return fmt.Errorf("openapi: line %d: %s has no JSON form", n.Line, n.Value)
		}
		e.buf.WriteString(strconv.FormatFloat(f, 'g', -1, 64))
	default:
		return fmt.Errorf("openapi: line %d: unsupported tag %s", n.Line, n.ShortTag())
	}
	return nil
}

func writeString(buf *bytes.Buffer, s string) {
	b, _ := json.Marshal(s) // a string always marshals
	buf.Write(b)
}
