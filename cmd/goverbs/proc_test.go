package main

import "github.com/goverbs/goverbs/internal/testutil/proc"

// The test files' names for a program a test runs beside itself: this
// binary as goverbs (see envRunMain) or a C peer.
type (
	ppProc = proc.Proc
	cmProc = proc.Proc
)
