package cloud

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxIDBytes bounds every identifier and name the fake cloud and the driver accept, in bytes:
// volume, snapshot, instance and fault-rule IDs, volume and snapshot names, wherever they
// appear (URL path, query, JSON body). It is the CSI spec's size limit of a string field
// (spec.md, "Size Limits"): a volume ID, node ID or name a CO sends has at most 128 bytes, so
// every value the driver can be asked about fits, and a value over it is refused before it is
// used, logged, stored or echoed.
const MaxIDBytes = 128

// MaxAttachSlots bounds every count of attach slots the fake cloud accepts: an instance
// type's maxAttachments, an instance's attachLimit and its outOfBandSlots. No real machine
// comes near it (the largest clouds allow a few hundred volumes per instance), and at
// DefaultMaxInstances of such instances the slot sums stay far inside an int.
const MaxAttachSlots = 4096

// MaxQuotaCount bounds the account's count quotas (attachments, volumes). It is above any
// account a test bed holds (the instance bound is 10,000) and keeps every sum of uses exact.
const MaxQuotaCount = 1_000_000

// MaxQuotaBytes bounds the account's capacityBytes quota: 1 EiB (2^60 bytes), 8 times below
// MaxInt64, so used + requested bytes of volumes the quota admitted never overflows.
const MaxQuotaBytes int64 = 1 << 60

// MaxQuotedBytes is how much of an input value an error message quotes at most, in bytes;
// the rest is summarised by its length (see Quote).
const MaxQuotedBytes = 64

// MaxMessageBytes bounds the message of any error body the cloud sends, in bytes: a message
// built from several quoted inputs still has a size bound.
const MaxMessageBytes = 1024

// Quote is strconv.Quote of at most the first MaxQuotedBytes bytes of v (cut at a rune
// boundary), followed by "... (N bytes)" when v is longer, so an error message never echoes
// a whole input.
func Quote(v string) string {
	if len(v) <= MaxQuotedBytes {
		return strconv.Quote(v)
	}
	cut := MaxQuotedBytes
	for cut > 0 && !utf8.RuneStart(v[cut]) {
		cut--
	}
	return fmt.Sprintf("%s... (%d bytes)", strconv.Quote(v[:cut]), len(v))
}

// TruncateMessage cuts msg to at most MaxMessageBytes bytes (at a rune boundary), marking the
// cut with "...".
func TruncateMessage(msg string) string {
	if len(msg) <= MaxMessageBytes {
		return msg
	}
	cut := MaxMessageBytes - len("...")
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + "..."
}

// csiBannedInName reports the control characters the CSI spec bans from names
// (CreateVolumeRequest.name, CreateSnapshotRequest.name: U+0000–U+0008, U+000B, U+000C,
// U+000E–U+001F, U+007F–U+009F); tab, line feed and carriage return stay allowed.
func csiBannedInName(r rune) bool {
	return unicode.IsControl(r) && r != '\t' && r != '\n' && r != '\r'
}

// CheckName reports what is wrong with a volume or snapshot name, or nil: empty (or white
// space only), over MaxIDBytes, not UTF-8, or holding a control character the CSI spec bans
// from names. Refusing a name CSI allows would fail a valid CreateVolume, so tab, line feed
// and carriage return pass. The error quotes at most a bounded prefix of v.
func CheckName(field, v string) error {
	return checkText(field, v, csiBannedInName)
}

// CheckID reports what is wrong with an identifier (volume, snapshot, instance or fault-rule
// ID), or nil: the rule of CheckName, every control character refused (an ID never has one,
// and a node name has none), and not "." or ".." (an ID goes into a URL path, where those
// are path steps, not names). The error quotes at most a bounded prefix of v.
func CheckID(field, v string) error {
	if err := checkText(field, v, unicode.IsControl); err != nil {
		return err
	}
	if v == "." || v == ".." {
		return fmt.Errorf("%s %q is a path step, not an identifier", field, v)
	}
	return nil
}

// CheckOptionalID is CheckID for a field that may be empty (a filter, say).
func CheckOptionalID(field, v string) error {
	if v == "" {
		return nil
	}
	return CheckID(field, v)
}

// CheckFreeText reports what is wrong with a free-text field the cloud stores and answers
// with (a health message, a scenario's description, expectation or note), or nil: over
// maxBytes, not UTF-8, or holding any control character (unicode.IsControl: NUL, ESC, tab,
// newline, DEL, C1), refused as in IDs, so nothing the cloud echoes can move a terminal's
// cursor or forge a log line. Empty is fine. The error quotes at most a bounded prefix of v.
func CheckFreeText(field, v string, maxBytes int) error {
	if len(v) > maxBytes {
		return fmt.Errorf("%s is %d bytes long, at most %d allowed", field, len(v), maxBytes)
	}
	return checkRunes(field, v, unicode.IsControl)
}

// checkText says what is wrong, in that order: nothing at all ("is required"), too long, not
// UTF-8, a banned character (named, with its byte offset: a path ID of "%0A" is a control
// character, not a missing ID), or white space alone (a value given, but blank).
func checkText(field, v string, banned func(rune) bool) error {
	if v == "" {
		return fmt.Errorf("%s is required", field)
	}
	if len(v) > MaxIDBytes {
		return fmt.Errorf("%s is %d bytes long, at most %d allowed", field, len(v), MaxIDBytes)
	}
	if err := checkRunes(field, v, banned); err != nil {
		return err
	}
	if strings.TrimSpace(v) == "" {
		return fmt.Errorf("%s %s is only white space", field, Quote(v))
	}
	return nil
}

// checkRunes refuses v when it is not UTF-8 or holds a rune banned reports, naming the first.
func checkRunes(field, v string, banned func(rune) bool) error {
	if !utf8.ValidString(v) {
		return fmt.Errorf("%s %s is not valid UTF-8", field, Quote(v))
	}
	for i, r := range v {
		if banned(r) {
			return fmt.Errorf("%s has the control character %U at byte %d", field, r, i)
		}
	}
	return nil
}
