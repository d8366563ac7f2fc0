package localcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// inotifyPerNode is how many inotify instances one hollow kubelet holds: its static-pod
// config watch and its plugin watcher (plugins_registry). A kubelet that cannot get one
// logs "couldn't initialize inotify: too many open files" and never registers a plugin.
const inotifyPerNode = 2

// inotifySpare are the instances left for the rest of the cluster and the machine.
const inotifySpare = 16

// checkInotify reports an error when nodes hollow kubelets would not fit in the inotify
// instances left to this user: limit is fs.inotify.max_user_instances, used the
// instances the user's processes hold now.
func checkInotify(limit, used, nodes int) error {
	need := nodes*inotifyPerNode + inotifySpare
	if free := limit - used; free < need {
		return fmt.Errorf("%d hollow kubelets need about %d inotify instances (%d each, plugin watcher and static pods, and %d spare), but only %d of fs.inotify.max_user_instances=%d are free: "+
			"raise it, e.g. sysctl -w fs.inotify.max_user_instances=%d", nodes, need, inotifyPerNode, inotifySpare, max(free, 0), limit, max(1024, used+need))
	}
	return nil
}

// inotifyUsage reads fs.inotify.max_user_instances and counts the inotify instances held by
// this user's processes (file descriptors linked to anon_inode:inotify). Processes it may not
// read are skipped, so the count is a floor.
func inotifyUsage() (limit, used int, err error) {
	data, err := os.ReadFile("/proc/sys/fs/inotify/max_user_instances")
	if err != nil {
		return 0, 0, fmt.Errorf("inotify limit: %w", err)
	}
	if limit, err = strconv.Atoi(strings.TrimSpace(string(data))); err != nil {
		return 0, 0, fmt.Errorf("inotify limit %q: %w", data, err)
	}
	uid := os.Getuid()
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		if fi, err := os.Stat(p); err != nil || !ownedBy(fi, uid) {
			continue
		}
		fds, err := os.ReadDir(filepath.Join(p, "fd"))
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if t, err := os.Readlink(filepath.Join(p, "fd", fd.Name())); err == nil && t == "anon_inode:inotify" {
				used++
			}
		}
	}
	return limit, used, nil
}
