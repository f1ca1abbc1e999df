package server

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/tinyllm/durable/activity"
)

// The auth file is one small JSON document listing principals:
//
//	{"principals": [
//	  {"name": "payments-worker", "role": "worker", "token_sha256": "9f86…", "task_queues": ["payments"]},
//	  {"name": "dashboards", "role": "reader", "token_sha256": "…"},
//	  {"name": "alice", "role": "operator", "cert_cn": "alice"}
//	]}
//
// A principal authenticates with a bearer token, of which the file keeps only
// the SHA-256 (hex), or with a client certificate whose common name is
// cert_cn (which needs durabled --tls-client-ca). task_queues limits a worker
// to those queues.

// maxPrincipals bounds the principals of one auth file.
const maxPrincipals = 10000

// authEntry is one principal as the file spells it.
type authEntry struct {
	Name        string   `json:"name"`
	Role        string   `json:"role"`
	TokenSHA256 string   `json:"token_sha256"`
	CertCN      string   `json:"cert_cn"`
	TaskQueues  []string `json:"task_queues"`
}

// Identities is a parsed auth file: every principal, found by the hash of its
// token or by its certificate's common name.
type Identities struct {
	principals []*Principal
	byToken    map[[sha256.Size]byte]*Principal
	byCN       map[string]*Principal
}

// Len is the number of principals.
func (ids *Identities) Len() int { return len(ids.principals) }

// UsesCertificates reports whether any principal authenticates with a
// client certificate.
func (ids *Identities) UsesCertificates() bool { return len(ids.byCN) > 0 }

// LoadAuthFile reads and checks the auth file at path.
func LoadAuthFile(path string) (*Identities, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("auth file: %w", err)
	}
	ids, err := ParseAuthFile(data)
	if err != nil {
		return nil, fmt.Errorf("auth file %s: %w", path, err)
	}
	return ids, nil
}

// ParseAuthFile checks an auth file and returns its identities. Errors name
// the principal and the field, so the file can be fixed from the message.
func ParseAuthFile(data []byte) (*Identities, error) {
	var file struct {
		Principals []json.RawMessage `json:"principals"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&file); err != nil {
		return nil, fmt.Errorf(`not an auth file (want {"principals": [...]}): %w`, err)
	}
	if dec.More() {
		return nil, errors.New("trailing data after the JSON document")
	}
	if len(file.Principals) == 0 {
		return nil, errors.New(`no principals: list at least one under "principals"`)
	}
	if len(file.Principals) > maxPrincipals {
		return nil, fmt.Errorf("%d principals, more than the limit of %d", len(file.Principals), maxPrincipals)
	}
	ids := &Identities{byToken: map[[sha256.Size]byte]*Principal{}, byCN: map[string]*Principal{}}
	names := map[string]int{}
	for i, raw := range file.Principals {
		p, hash, cn, err := parseEntry(raw)
		where := fmt.Sprintf("principals[%d]", i)
		if p != nil && p.Name != "" {
			where += fmt.Sprintf(" (%q)", p.Name)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		if j, dup := names[p.Name]; dup {
			return nil, fmt.Errorf("%s: name is already used by principals[%d]", where, j)
		}
		names[p.Name] = i
		if hash != nil {
			if other, dup := ids.byToken[*hash]; dup {
				return nil, fmt.Errorf("%s: token_sha256 is already used by %q; every principal needs its own token", where, other.Name)
			}
			ids.byToken[*hash] = p
		}
		if cn != "" {
			if other, dup := ids.byCN[cn]; dup {
				return nil, fmt.Errorf("%s: cert_cn %q is already used by %q", where, cn, other.Name)
			}
			ids.byCN[cn] = p
		}
		ids.principals = append(ids.principals, p)
	}
	return ids, nil
}

// parseEntry checks one principal. It returns the principal (with what was
// read of it, even on error, so the error can name it) and its token hash or
// certificate name.
func parseEntry(raw json.RawMessage) (*Principal, *[sha256.Size]byte, string, error) {
	var e authEntry
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		if strings.Contains(err.Error(), `unknown field "token"`) {
			return nil, nil, "", errors.New(`unknown field "token": the file keeps only a token's SHA-256, as token_sha256 (durabled token prints both)`)
		}
		return nil, nil, "", err
	}
	p := &Principal{Name: e.Name, Role: Role(e.Role), TaskQueues: e.TaskQueues}
	if err := checkName("name", e.Name); err != nil {
		return p, nil, "", err
	}
	if e.Name == LocalPrincipal.Name {
		return p, nil, "", fmt.Errorf("name %q is reserved for calls to a daemon without --auth", e.Name)
	}
	switch p.Role {
	case RoleWorker, RoleReader, RoleOperator:
	case "":
		return p, nil, "", errors.New("role is required: worker, reader or operator")
	default:
		return p, nil, "", fmt.Errorf("role %q is not one of worker, reader, operator", e.Role)
	}
	if len(e.TaskQueues) > 0 && p.Role != RoleWorker {
		return p, nil, "", fmt.Errorf("task_queues limits workers only; role %s has no task queues", p.Role)
	}
	seen := map[string]bool{}
	for j, q := range e.TaskQueues {
		if err := checkName(fmt.Sprintf("task_queues[%d]", j), q); err != nil {
			return p, nil, "", err
		}
		if seen[q] {
			return p, nil, "", fmt.Errorf("task_queues[%d]: %q is listed twice", j, q)
		}
		seen[q] = true
	}
	switch {
	case e.TokenSHA256 != "" && e.CertCN != "":
		return p, nil, "", errors.New("give token_sha256 or cert_cn, not both: a principal authenticates one way")
	case e.TokenSHA256 != "":
		b, err := hex.DecodeString(e.TokenSHA256)
		if err != nil || len(b) != sha256.Size {
			return p, nil, "", fmt.Errorf("token_sha256 must be %d hex digits (the SHA-256 of the token), got %q", 2*sha256.Size, e.TokenSHA256)
		}
		var h [sha256.Size]byte
		copy(h[:], b)
		return p, &h, "", nil
	case e.CertCN != "":
		if err := checkName("cert_cn", e.CertCN); err != nil {
			return p, nil, "", err
		}
		return p, nil, e.CertCN, nil
	}
	return p, nil, "", errors.New("no credentials: give token_sha256 (a bearer token's SHA-256) or cert_cn (a client certificate's common name)")
}

// checkName checks a name, queue or common name of the auth file by the
// rule for ids (activity.CheckID): names show up in the audit log, in wf and
// in the console, and must read as what they are.
func checkName(field, s string) error {
	if err := activity.CheckID(s); err != nil {
		return fmt.Errorf("%s %s", field, err)
	}
	return nil
}
