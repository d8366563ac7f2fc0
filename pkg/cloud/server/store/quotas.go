package store

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

func (t *txn) quotas() (*cloud.Quotas, error) {
	q, err := decodeQuotas(t.tx.Bucket(bucketMeta).Get(keyQuotas))
	if err != nil {
		return nil, fmt.Errorf("decode quotas: %w", err)
	}
	return q, nil
}

// putQuotas stores q stamped with the transaction's revision, which the caller has bumped.
func (t *txn) putQuotas(q *cloud.Quotas) error {
	q.Revision = t.rev
	return t.put(bucketMeta, keyQuotas, encodeQuotas(q))
}

// Quotas returns the account quotas; Revision is the revision of their last change (limits
// or use), the value If-Match is compared with.
func (s *Store) Quotas() (*cloud.Quotas, error) {
	var out *cloud.Quotas
	err := s.view(func(t *txn) error {
		var err error
		out, err = t.quotas()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("get quotas: %w", err)
	}
	return out, nil
}

// PatchQuotas sets quota limits. Limits must be in [0, cloud.MaxQuotaCount] (counts) or
// [0, cloud.MaxQuotaBytes] (capacityBytes), else InvalidArgument; a limit below current
// use is allowed (it refuses new use, evicts nothing). An empty patch is InvalidArgument. With
// ifMatch != nil the quotas' Revision must equal it (PreconditionFailed).
func (s *Store) PatchQuotas(p cloud.QuotasPatch, ifMatch *uint64) (*cloud.Quotas, error) {
	if err := p.Check(); err != nil {
		return nil, cloud.NewError(cloud.CodeInvalidArgument, "patch quotas: %v", err)
	}
	var out *cloud.Quotas
	err := s.update(func(t *txn) error {
		q, err := t.quotas()
		if err != nil {
			return err
		}
		if ifMatch != nil && *ifMatch != q.Revision {
			return cloud.NewError(cloud.CodePreconditionFailed, "quotas are at revision %d, If-Match wants %d", q.Revision, *ifMatch)
		}
		if p.Attachments != nil {
			q.Attachments.Limit = *p.Attachments
		}
		if p.Volumes != nil {
			q.Volumes.Limit = *p.Volumes
		}
		if p.CapacityBytes != nil {
			q.CapacityBytes.Limit = *p.CapacityBytes
		}
		if _, err := t.bump(); err != nil {
			return err
		}
		if err := t.putQuotas(q); err != nil {
			return err
		}
		if err := t.event(cloud.Event{Type: "QuotasChanged", Detail: fmt.Sprintf("attachments=%d volumes=%d capacityBytes=%d",
			q.Attachments.Limit, q.Volumes.Limit, q.CapacityBytes.Limit)}); err != nil {
			return err
		}
		out = q
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("patch quotas: %w", err)
	}
	return out, nil
}

// quotasLen is the size of the stored quotas: seven 8-byte integers, limit and use of
// attachments, volumes and bytes, then the revision.
const quotasLen = 7 * 8

func encodeQuotas(q *cloud.Quotas) []byte {
	b := make([]byte, 0, quotasLen)
	for _, v := range []int64{q.Attachments.Limit, q.Attachments.Used, q.Volumes.Limit, q.Volumes.Used, q.CapacityBytes.Limit, q.CapacityBytes.Used} {
		b = binary.BigEndian.AppendUint64(b, uint64(v))
	}
	return binary.BigEndian.AppendUint64(b, q.Revision)
}

func decodeQuotas(b []byte) (*cloud.Quotas, error) {
	if b == nil {
		return &cloud.Quotas{}, nil // not seeded yet
	}
	if len(b) != quotasLen {
		return nil, errors.New("quotas record has the wrong size")
	}
	n := func(i int) int64 { return int64(binary.BigEndian.Uint64(b[8*i:])) }
	return &cloud.Quotas{
		Attachments:   cloud.Quota{Limit: n(0), Used: n(1)},
		Volumes:       cloud.Quota{Limit: n(2), Used: n(3)},
		CapacityBytes: cloud.Quota{Limit: n(4), Used: n(5)},
		Revision:      binary.BigEndian.Uint64(b[48:]),
	}, nil
}
