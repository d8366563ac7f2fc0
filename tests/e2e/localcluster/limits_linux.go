package localcluster

import (
	"os"
	"syscall"
)

// ownedBy reports whether fi (a /proc/<pid> entry) belongs to uid.
func ownedBy(fi os.FileInfo, uid int) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == uid
}
