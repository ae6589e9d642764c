//go:build unix

package badger

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockDir takes the lock Badger takes on dir (an exclusive flock on the
// directory itself) and returns its release. It fails when another process
// holds it: that process has the store open.
func lockDir(dir string) (unlock func(), err error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("another process has the store in %s open", dir)
		}
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
	}, nil
}
