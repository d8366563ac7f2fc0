package nodestate

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"
)

// Identity is the persisted form of the node's identity: the node ID and the accessible
// topology (the zone) NodeGetInfo reports. The kubelet writes both into the CSINode object,
// which the API server will not let change (docs/design.md, rule 4), so once saved they are
// what every later process on this node reports.
type Identity struct {
	// Version is the file format version, 1.
	Version int `json:"version"`
	// NodeID is the --node-id the identity belongs to.
	NodeID string `json:"nodeId"`
	// Zone is the value of the topology zone key.
	Zone string `json:"zone"`
	// SavedAt is when the cloud told us the zone.
	SavedAt time.Time `json:"savedAt"`
}

// LoadIdentity reads the identity persisted in d. A missing file, or a Dir without state, is
// (zero, false, nil); a file that cannot be read or parsed, or that lacks a node ID or zone,
// is an error.
func (d Dir) LoadIdentity() (Identity, bool, error) {
	path := d.IdentityFile()
	if path == "" {
		return Identity{}, false, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Identity{}, false, nil
	}
	if err != nil {
		return Identity{}, false, fmt.Errorf("read node identity %s: %w", path, err)
	}
	var id Identity
	if err := json.Unmarshal(b, &id); err != nil {
		return Identity{}, false, fmt.Errorf("parse node identity %s: %w", path, err)
	}
	if id.Version < 1 || id.NodeID == "" || id.Zone == "" {
		return Identity{}, false, fmt.Errorf("node identity %s is incomplete: %+v", path, id)
	}
	return id, true, nil
}

// SaveIdentity writes id to d atomically (WriteAtomic); nothing without state.
func (d Dir) SaveIdentity(id Identity) error {
	path := d.IdentityFile()
	if path == "" {
		return nil
	}
	b, err := json.Marshal(id)
	if err != nil {
		return fmt.Errorf("encode node identity: %w", err)
	}
	if err := d.WriteAtomic(path, append(b, '\n')); err != nil {
		return fmt.Errorf("save node identity: %w", err)
	}
	return nil
}
