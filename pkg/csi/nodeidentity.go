package csi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/fakecloud/fakecloud-csi/pkg/csi/internal/atomicfile"
)

// nodeIdentityFile is the file in --state-dir that keeps what NodeGetInfo reported as the
// node's identity, so that a restarted plugin can answer while the cloud is down.
const nodeIdentityFile = "node.json"

// Where the zone a NodeServer reports came from (log key "source").
const (
	zoneSourceCloud    = "cloud"
	zoneSourceStateDir = "stateDir"
)

// nodeIdentity is the persisted form of the node's identity: the node ID and the accessible
// topology (the zone) NodeGetInfo reports. The kubelet writes both into the CSINode object,
// which the API server will not let change (domain.md rule 4), so once saved they are what
// every later process on this node reports.
type nodeIdentity struct {
	// Version is the file format version, 1.
	Version int `json:"version"`
	// NodeID is the --node-id the identity belongs to.
	NodeID string `json:"nodeId"`
	// Zone is the value of TopologyZoneKey.
	Zone string `json:"zone"`
	// SavedAt is when the cloud told us the zone.
	SavedAt time.Time `json:"savedAt"`
}

// loadNodeIdentity reads the identity persisted at path. A missing file is (zero, false, nil);
// a file that cannot be read or parsed, or that lacks a node ID or zone, is an error.
func loadNodeIdentity(path string) (nodeIdentity, bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nodeIdentity{}, false, nil
	}
	if err != nil {
		return nodeIdentity{}, false, fmt.Errorf("read node identity %s: %w", path, err)
	}
	var id nodeIdentity
	if err := json.Unmarshal(b, &id); err != nil {
		return nodeIdentity{}, false, fmt.Errorf("parse node identity %s: %w", path, err)
	}
	if id.Version < 1 || id.NodeID == "" || id.Zone == "" {
		return nodeIdentity{}, false, fmt.Errorf("node identity %s is incomplete: %+v", path, id)
	}
	return id, true, nil
}

// saveNodeIdentity writes id to path atomically (temporary file, fsync, rename).
func saveNodeIdentity(path string, id nodeIdentity) error {
	b, err := json.Marshal(id)
	if err != nil {
		return fmt.Errorf("encode node identity: %w", err)
	}
	if err := atomicfile.WriteFile(path, append(b, '\n'), 0o640); err != nil {
		return fmt.Errorf("save node identity: %w", err)
	}
	return nil
}

// identityPath is <StateDir>/node.json, or "" when the node keeps no state.
func (n *NodeServer) identityPath() string {
	if n.cfg.StateDir == "" {
		return ""
	}
	return filepath.Join(n.cfg.StateDir, nodeIdentityFile)
}
