//go:build !unix

package badger

import "errors"

// lockDir is not implemented off Unix: without it, removeEmptyMemtables
// leaves the directory to Badger as it is.
func lockDir(string) (func(), error) {
	return nil, errors.ErrUnsupported
}
