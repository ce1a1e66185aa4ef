package cq

import "github.com/goverbs/goverbs/internal/provider"

// Cleans reports whether the CQ's provider removes a QP's completions
// from the ring when the QP is destroyed or reset (provider.CQCleaner).
func (c *CQ) Cleans() bool {
	_, ok := c.ring.(provider.CQCleaner)
	return ok
}
