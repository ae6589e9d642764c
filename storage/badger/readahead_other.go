//go:build !linux

package badger

// walAdvice is Linux's (readahead_linux.go): elsewhere the memtable logs'
// mappings are left as Badger makes them.
type walAdvice struct{}

func (s *Store) startWALAdvice(string) {}

func (a *walAdvice) landed() {}

func (a *walAdvice) close() {}
