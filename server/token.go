package server

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A task token is the engine's lease body sealed by the server:
//
//	version:u8 (1) | principal:s16 | body | mac:32
//
// where mac is HMAC-SHA256 under the daemon's token key over everything
// before it, and principal is who leased the task. A worker can neither make
// a token nor change one (a changed byte fails the MAC), and a token is good
// only for the principal it was issued to. The body is the engine's
// TaskToken: workflow, activity, attempt and a random lease id.

// TokenKeySize is the length of the key task tokens are sealed with.
const TokenKeySize = 32

// TokenKeyFile is the name of the key's file in the data directory.
const TokenKeyFile = "task-token.key"

const (
	tokenVersion = 1
	tokenMACSize = sha256.Size
)

var (
	// errTokenNotOurs: the token fails its MAC, is cut short or of an
	// unknown version. To a worker this is the same as a stale lease.
	errTokenNotOurs = status.Error(codes.FailedPrecondition,
		"task_token is not a token this daemon issued (its signature does not verify); the lease it names cannot be acted on")
	// errTokenOtherPrincipal: a genuine token presented by someone other
	// than the principal it was issued to.
	errTokenOtherPrincipal = status.Error(codes.PermissionDenied,
		"task_token was issued to another principal; only the worker that leased the task may report on it")
)

// sealToken returns body sealed for principal under key.
func sealToken(key []byte, principal string, body []byte) []byte {
	b := make([]byte, 0, 1+2+len(principal)+len(body)+tokenMACSize)
	b = append(b, tokenVersion)
	b = binary.BigEndian.AppendUint16(b, uint16(len(principal)))
	b = append(b, principal...)
	b = append(b, body...)
	m := hmac.New(sha256.New, key)
	m.Write(b)
	return m.Sum(b)
}

// openToken checks token's MAC and that it was issued to principal, and
// returns its body.
func openToken(key []byte, principal string, token []byte) ([]byte, error) {
	if len(token) < 1+2+tokenMACSize {
		return nil, errTokenNotOurs
	}
	signed, mac := token[:len(token)-tokenMACSize], token[len(token)-tokenMACSize:]
	m := hmac.New(sha256.New, key)
	m.Write(signed)
	if !hmac.Equal(m.Sum(nil), mac) {
		return nil, errTokenNotOurs
	}
	// Authentic from here on: the layout is ours.
	if signed[0] != tokenVersion {
		return nil, errTokenNotOurs
	}
	n := int(binary.BigEndian.Uint16(signed[1:3]))
	if 3+n > len(signed) {
		return nil, errTokenNotOurs
	}
	if !bytes.Equal(signed[3:3+n], []byte(principal)) {
		return nil, errTokenOtherPrincipal
	}
	return signed[3+n:], nil
}

// NewTokenKey returns a fresh random key, for a daemon whose tokens need not
// outlive it (tests, an in-memory store).
func NewTokenKey() []byte {
	key := make([]byte, TokenKeySize)
	if _, err := rand.Read(key); err != nil {
		panic(err) // crypto/rand.Read never fails on supported platforms
	}
	return key
}

// LoadTokenKey reads the token key from path, creating it on first use: fresh
// random bytes, mode 0600, written to a temporary file, synced and renamed
// into place, so a crash never leaves a partial key. The key must outlive
// restarts, or every outstanding lease is lost with it. It also reports
// whether the file can be read by other users than its owner.
func LoadTokenKey(path string) (key []byte, exposed bool, err error) {
	key, err = os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		key = NewTokenKey()
		if err := writeFileAtomic(path, key, 0o600); err != nil {
			return nil, false, fmt.Errorf("create token key: %w", err)
		}
		return key, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read token key: %w", err)
	}
	if len(key) != TokenKeySize {
		return nil, false, fmt.Errorf("token key %s has %d bytes, want %d: restore it from a backup, or delete it to make a new one (outstanding task tokens are then refused and their attempts retried)", path, len(key), TokenKeySize)
	}
	info, err := os.Stat(path)
	if err != nil {
		return nil, false, fmt.Errorf("token key: %w", err)
	}
	return key, info.Mode().Perm()&0o077 != 0, nil
}

// writeFileAtomic writes data to path through a synced temporary file and a
// rename, then syncs the directory so the rename survives a crash.
func writeFileAtomic(path string, data []byte, perm fs.FileMode) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op after the rename
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
