package badger

import "syscall"

// SpaceOf reads the volume that holds dir with statfs: Free is what a user
// without the file system's root reserve may still write (what df calls
// available), Total the volume's size.
func SpaceOf(dir string) (Space, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return Space{}, err
	}
	return Space{Free: st.Bavail * uint64(st.Bsize), Total: st.Blocks * uint64(st.Bsize)}, nil
}
