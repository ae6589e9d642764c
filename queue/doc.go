// Package queue will hold the persistent webhook retry queue on the shared
// Badger store (issue 5): pending jobs keyed by due time, leases, backoff,
// delivery and signing. Nothing uses it yet.
package queue
