package badger

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"

	badgerdb "github.com/dgraph-io/badger/v4"

	"github.com/rxgate/rxgate/storage"
)

var _ storage.AuditLog = (*Store)(nil)

// auditHead is the chain's head: the last entry's seq and hash. It is one
// key every append reads and writes, and the committer runs write
// functions one after another, each seeing what those before it wrote
// (tx.value reads the batch's and the batch in flight's writes): the
// single committer is what orders the chain.
type auditHead struct {
	Seq  uint64 `json:"seq"`
	Hash []byte `json:"hash"`
}

// auditRecordGuess is a typical stored entry's size: a partner read's
// ids, hashes and lengths.
const auditRecordGuess = 320

// appendAudit chains entries after the head and writes them in txn.
func appendAudit(txn *tx, entries []storage.AuditEntry) error {
	var head auditHead
	if err := getRecord(txn, auditHeadKey(), &head); err != nil && !errors.Is(err, storage.ErrNotFound) {
		return err
	}
	// The entries' own binary form, not JSON records: the append of every
	// read's entry is on the hot path's budget (issue 27's goal), and the
	// canonical encoding is what the hash covers. A batch is one value,
	// its records one after another, under the key of its last seq
	// (auditEntryKey): every key written grows the tree the requests read
	// and costs the commit allocations, and one key per read made an
	// audited read page markedly slower (BenchmarkPrescriptionPage's
	// audited variants, profiled). A lone entry's value is one record.
	value := make([]byte, 0, len(entries)*auditRecordGuess)
	for i := range entries {
		value = storage.AppendChainedAuditRecord(value, head.Seq, head.Hash, &entries[i])
		head.Seq, head.Hash = entries[i].Seq, entries[i].Hash
	}
	if err := txn.set(auditEntryKey(head.Seq), value); err != nil {
		return err
	}
	return putRecord(txn, auditHeadKey(), head)
}

// withAudit wraps fn so that it appends ctx's pending audit entry (if
// any) after its own writes, in its transaction: a function that fails
// appends nothing, and one that commits commits its entry. The entry is
// copied on each run, as fn may run more than once.
func withAudit(ctx context.Context, fn func(*tx) error) (func(*tx) error, *storage.AuditPending) {
	p := storage.PendingAudit(ctx)
	if p == nil {
		return fn, nil
	}
	return func(txn *tx) error {
		if err := fn(txn); err != nil {
			return err
		}
		e := p.Entry
		return appendAudit(txn, []storage.AuditEntry{e})
	}, p
}

// AppendAudit implements storage.AuditLog.
func (s *Store) AppendAudit(ctx context.Context, entries []storage.AuditEntry) error {
	if len(entries) == 0 {
		return nil
	}
	var out []storage.AuditEntry
	err := s.update(ctx, func(txn *tx) error {
		out = append(out[:0], entries...)
		return appendAudit(txn, out)
	})
	if err != nil {
		return fmt.Errorf("storage: append audit: %w", err)
	}
	copy(entries, out)
	return nil
}

// AuditHead implements storage.AuditLog.
func (s *Store) AuditHead(ctx context.Context) (uint64, []byte, error) {
	var head auditHead
	err := s.view(ctx, func(txn *tx) error { return getRecord(txn, auditHeadKey(), &head) })
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		return 0, nil, fmt.Errorf("storage: audit head: %w", err)
	}
	return head.Seq, head.Hash, nil
}

// ListAudit implements storage.AuditLog: the entries in seq order, those
// f does not pass skipped without being counted. A value that no longer
// decodes is listed as one placeholder (storage.CorruptAuditEntry) at the
// seq after the previous value's key, and the listing goes on past it.
func (s *Store) ListAudit(ctx context.Context, f storage.AuditFilter, req storage.PageRequest) ([]storage.AuditEntry, storage.PageInfo, error) {
	list := storage.List(f.Key())
	page, after, err := s.cursors.StartPage(list, req)
	if err != nil {
		return nil, storage.PageInfo{Limit: req.Limit}, fmt.Errorf("storage: list audit: %w", err)
	}
	var out []storage.AuditEntry
	var last []byte
	err = s.view(ctx, func(txn *tx) error {
		opts := badgerdb.DefaultIteratorOptions
		opts.Prefix = []byte(prefixAuditEntry)
		opts.PrefetchValues = false
		it := txn.iterator(opts)
		defer it.Close()
		// after is the key of the value holding the last entry listed
		// and that entry's seq (auditCursor): the page resumes in that
		// value, after that entry.
		var skipSeq uint64
		var skipKey []byte
		if after != nil {
			keyPart, seqPart := after, after
			if len(after) == 32 {
				keyPart, seqPart = after[:16], after[16:]
			}
			skipKey = append([]byte(prefixAuditEntry), keyPart...)
			skipSeq = auditSeqOf(seqPart)
			it.Seek(skipKey)
		} else {
			it.Rewind()
		}
		// prevSeq is the seq of the value before the current one (its
		// key's), which a value that no longer decodes starts after.
		var prevSeq uint64
		havePrev := false
		for ; it.Valid(); it.Next() {
			key := it.Item().Key()
			var entries []storage.AuditEntry
			var bad error
			if err := it.Item().Value(func(v []byte) error { entries, bad = decodeAuditValue(v); return nil }); err != nil {
				return err
			}
			if bad != nil {
				// A damaged value is listed as a placeholder at the first
				// seq it covers, and the listing goes on: verify names
				// the seq, and the entries after it stay readable.
				if !havePrev {
					var err error
					if prevSeq, err = auditSeqBefore(txn, key); err != nil {
						return err
					}
				}
				entries = []storage.AuditEntry{storage.CorruptAuditEntry(prevSeq + 1)}
			}
			prevSeq, havePrev = auditSeqOf(key[len(prefixAuditEntry):]), true
			if skipKey != nil && bytes.Equal(key, skipKey) {
				// Resume after the entry listed last, by position: the
				// stored order is what verify must see.
				for i := range entries {
					if entries[i].Seq == skipSeq {
						entries = entries[i+1:]
						break
					}
				}
			}
			skipKey = nil
			for i := range entries {
				e := &entries[i]
				if !f.Match(e) {
					continue
				}
				if !page.Take() {
					return nil
				}
				out = append(out, *e)
				last = auditCursor(last[:0], key[len(prefixAuditEntry):], e.Seq)
			}
		}
		return nil
	})
	if err != nil {
		return nil, storage.PageInfo{Limit: req.Limit}, fmt.Errorf("storage: list audit: %w", err)
	}
	return out, page.Info(last), nil
}

// AddAuditCheckpoint implements storage.AuditLog.
func (s *Store) AddAuditCheckpoint(ctx context.Context, c storage.AuditCheckpoint) error {
	if err := s.update(ctx, func(txn *tx) error { return putRecord(txn, auditCheckpointKey(c.Seq), c) }); err != nil {
		return fmt.Errorf("storage: add audit checkpoint: %w", err)
	}
	return nil
}

// ListAuditCheckpoints implements storage.AuditLog.
func (s *Store) ListAuditCheckpoints(ctx context.Context) ([]storage.AuditCheckpoint, error) {
	var out []storage.AuditCheckpoint
	err := s.view(ctx, func(txn *tx) error {
		return s.scan(txn, []byte(prefixAuditCheckpoint), func(_, v []byte) error {
			var c storage.AuditCheckpoint
			if err := decode(v, &c); err != nil {
				return err
			}
			out = append(out, c)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("storage: list audit checkpoints: %w", err)
	}
	return out, nil
}

// auditPurgeBatch bounds the entries one purge transaction deletes.
const auditPurgeBatch = 2_000

// PurgeAudit implements storage.AuditLog. The start marker is written
// with the first batch, before any entry it covers is gone: a crash in
// the middle leaves a marker and entries before it, which verify accepts.
func (s *Store) PurgeAudit(ctx context.Context, before uint64, start storage.AuditCheckpoint) (int, error) {
	if before <= 1 {
		return 0, nil
	}
	if err := s.AddAuditCheckpoint(ctx, start); err != nil {
		return 0, err
	}
	total := 0
	for {
		var keys [][]byte
		entries := 0
		// A value straddling before (a batch whose first entries go) is
		// rewritten with the entries it keeps: trimKey and trimmed.
		var trimKey, trimmed []byte
		err := s.view(ctx, func(txn *tx) error {
			opts := badgerdb.DefaultIteratorOptions
			opts.Prefix = []byte(prefixAuditEntry)
			opts.PrefetchValues = false
			it := txn.iterator(opts)
			defer it.Close()
			for it.Rewind(); it.Valid() && len(keys) < auditPurgeBatch; it.Next() {
				k := it.Item().Key()
				v, err := it.Item().ValueCopy(nil)
				if err != nil {
					return err
				}
				if auditSeqOf(k[len(prefixAuditEntry):]) < before {
					n, err := countAuditRecords(v)
					if err != nil {
						return err
					}
					keys, entries = append(keys, bytes.Clone(k)), entries+n
					continue
				}
				off, n, err := auditTrimBefore(v, before)
				if err != nil {
					return err
				}
				if n > 0 {
					trimKey, trimmed, entries = bytes.Clone(k), v[off:], entries+n
				}
				break
			}
			p := prefixAuditCheckpoint
			scanKeys(txn, []byte(p), func(k []byte) {
				if len(keys) < 2*auditPurgeBatch && auditSeqOf(k[len(p):]) < before && auditSeqOf(k[len(p):]) != start.Seq {
					keys = append(keys, bytes.Clone(k))
				}
			})
			return nil
		})
		if err != nil {
			return total, fmt.Errorf("storage: purge audit: %w", err)
		}
		if len(keys) == 0 && trimKey == nil {
			return total, nil
		}
		err = s.update(ctx, func(txn *tx) error {
			for _, k := range keys {
				if err := txn.delete(k); err != nil {
					return err
				}
			}
			if trimKey != nil {
				return txn.set(trimKey, trimmed)
			}
			return nil
		})
		if err != nil {
			return total, fmt.Errorf("storage: purge audit: %w", err)
		}
		total += entries
	}
}

// auditSeqBefore returns the last seq stored before the value under key:
// the previous value's key's, or, with none, the start marker's (0 for a
// chain never purged).
func auditSeqBefore(txn *tx, key []byte) (uint64, error) {
	opts := badgerdb.DefaultIteratorOptions
	opts.Prefix = []byte(prefixAuditEntry)
	opts.PrefetchValues = false
	opts.Reverse = true
	it := txn.iterator(opts)
	defer it.Close()
	it.Seek(key)
	if it.Valid() && bytes.Equal(it.Item().Key(), key) {
		it.Next()
	}
	if it.Valid() {
		return auditSeqOf(it.Item().Key()[len(prefixAuditEntry):]), nil
	}
	var seq uint64
	opts = badgerdb.DefaultIteratorOptions
	opts.Prefix = []byte(prefixAuditCheckpoint)
	cps := txn.iterator(opts)
	defer cps.Close()
	for cps.Rewind(); cps.Valid(); cps.Next() {
		var c storage.AuditCheckpoint
		if err := cps.Item().Value(func(v []byte) error { return decode(v, &c) }); err != nil {
			return 0, err
		}
		if c.Start && c.Seq > seq {
			seq = c.Seq
		}
	}
	return seq, nil
}

// countAuditRecords returns how many records a stored value holds.
func countAuditRecords(v []byte) (int, error) {
	n := 0
	for len(v) > 0 {
		var err error
		if _, v, err = storage.NextAuditRecord(v); err != nil {
			return 0, err
		}
		n++
	}
	return n, nil
}

// auditTrimBefore returns the offset in v of its first record at or after
// seq before, and how many records come ahead of it.
func auditTrimBefore(v []byte, before uint64) (int, int, error) {
	all, n := len(v), 0
	for len(v) > 0 {
		e, rest, err := storage.NextAuditRecord(v)
		if err != nil {
			return 0, 0, err
		}
		if e.Seq >= before {
			break
		}
		v, n = rest, n+1
	}
	return all - len(v), n, nil
}

// decodeAuditValue parses a stored value: one record or more.
func decodeAuditValue(v []byte) ([]storage.AuditEntry, error) {
	var out []storage.AuditEntry
	for {
		e, rest, err := storage.NextAuditRecord(v)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
		if v = rest; len(v) == 0 {
			return out, nil
		}
	}
}

// auditCursor is a list position: the key's seq, then the entry's.
func auditCursor(dst, keySeq []byte, seq uint64) []byte {
	return appendAuditSeqKey(append(dst, keySeq...), seq)
}

// auditSeqKey is a seq as 16 hex digits, so that key order is seq order.
func auditSeqKey(seq uint64) string {
	return string(appendAuditSeqKey(nil, seq))
}

// appendAuditSeqKey appends auditSeqKey(seq) to dst.
func appendAuditSeqKey(dst []byte, seq uint64) []byte {
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], seq)
	return hex.AppendEncode(dst, v[:])
}

// auditSeqOf reads a seq written by auditSeqKey.
func auditSeqOf(b []byte) uint64 {
	var v [8]byte
	if _, err := hex.Decode(v[:], b); err != nil {
		return 0
	}
	return binary.BigEndian.Uint64(v[:])
}
