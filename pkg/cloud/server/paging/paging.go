// Package paging is the one pagination contract of the fake cloud's list routes
// (/v1/volumes, /v1/snapshots, /v1/events, /v1/faults): a page size with a default and a
// maximum, and an opaque page token naming the last item of the previous page.
//
// A token is base64url("v1:" + key) without padding, where key is the list's own cursor (a
// volume ID, an event's sequence number in hex, ...). Tokens are bounded like every
// identifier (cloud.MaxIDBytes), so a malformed one is refused before it is decoded.
package paging

import (
	"encoding/base64"
	"strconv"
	"strings"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// Page sizes of every list route, in items.
const (
	// DefaultSize is the page size when the caller names none (maxResults 0 or absent).
	DefaultSize = 100
	// MaxSize caps maxResults; larger values are served as MaxSize, not refused, so a
	// caller asking for "everything" gets full pages and a token.
	MaxSize = 1000
)

// Size normalises maxResults: 0 is DefaultSize, values above MaxSize are MaxSize, a negative
// value is InvalidArgument.
func Size(maxResults int) (int, error) {
	switch {
	case maxResults < 0:
		return 0, cloud.NewError(cloud.CodeInvalidArgument, "maxResults must be >= 0, got %d", maxResults)
	case maxResults == 0:
		return DefaultSize, nil
	default:
		return min(maxResults, MaxSize), nil
	}
}

// Token is the page token that continues after key.
func Token(key string) string {
	return base64.RawURLEncoding.EncodeToString([]byte("v1:" + key))
}

// Parse returns the key a token from Token names; valid checks the key's shape. A token
// over cloud.MaxIDBytes, not base64url, without the "v1:" prefix or with a key valid refuses
// is InvalidArgument, quoting at most a bounded prefix of the token.
func Parse(token string, valid func(key string) bool) (string, error) {
	bad := cloud.NewError(cloud.CodeInvalidArgument, "invalid pageToken %s", cloud.Quote(token))
	if len(token) > cloud.MaxIDBytes {
		return "", bad
	}
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return "", bad
	}
	key, ok := strings.CutPrefix(string(raw), "v1:")
	if !ok || !valid(key) {
		return "", bad
	}
	return key, nil
}

// HexKey reports whether key is prefix followed by exactly digits hexadecimal digits, the
// shape of the fake cloud's generated IDs ("vol-0000002a") and event cursors.
func HexKey(key, prefix string, digits int) bool {
	hex, ok := strings.CutPrefix(key, prefix)
	if !ok || len(hex) != digits {
		return false
	}
	_, err := strconv.ParseUint(hex, 16, 64)
	return err == nil
}
