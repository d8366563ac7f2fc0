package store

import (
	"bytes"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/paging"
)

// Page sizes of the list operations (package paging, shared by every list route).
const (
	DefaultPageSize = paging.DefaultSize
	MaxPageSize     = paging.MaxSize
)

// pageKeys turn a bucket's keys into the keys of page tokens and back.
type pageKeys struct {
	token func(k []byte) string
	key   func(token string) ([]byte, bool)
}

// idKeys are the keys of a bucket of generated IDs, prefix plus 8 hex digits ("vol-0000002a").
func idKeys(prefix string) pageKeys {
	return pageKeys{
		token: func(k []byte) string { return string(k) },
		key: func(s string) ([]byte, bool) {
			if !paging.HexKey(s, prefix, 8) {
				return nil, false
			}
			return []byte(s), true
		},
	}
}

// pageRequest is one page's position: its size (see paging.Size), the token of the page
// before, and a key the walk starts after when there is no token (nil: the first key).
type pageRequest struct {
	maxResults int
	token      string
	after      []byte
}

// page walks bucket b in key order after the page token's key (or req.after). Each value for
// which match reports true is handed to take, at most the page size of them; *next is set
// only when a further matching value exists, so the last page never promises another.
func (t *txn) page(b []byte, keys pageKeys, req pageRequest,
	match func(v []byte) (bool, error), take func(v []byte) error, next *string) error {
	size, err := paging.Size(req.maxResults)
	if err != nil {
		return err
	}
	after := req.after
	if req.token != "" {
		key, err := paging.Parse(req.token, func(s string) bool { _, ok := keys.key(s); return ok })
		if err != nil {
			return err
		}
		after, _ = keys.key(key)
	}
	c := t.tx.Bucket(b).Cursor()
	k, v := c.First()
	if after != nil {
		k, v = c.Seek(after)
		if k != nil && bytes.Equal(k, after) {
			k, v = c.Next()
		}
	}
	taken := 0
	var last []byte
	for ; k != nil; k, v = c.Next() {
		ok, err := match(v)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		if taken == size {
			*next = paging.Token(keys.token(last))
			return nil
		}
		if err := take(v); err != nil {
			return err
		}
		taken++
		last = k
	}
	return nil
}
