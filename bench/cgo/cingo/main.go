// Command bench-cingo is a control for `make bench`: bench-c's whole
// program (bench/c/main.c, loops and verbs calls in C) run inside a Go
// process, through one cgo call to its main. The process has the Go
// runtime's threads (sysmon, idle Ms) and a Go binary's memory, but none
// of its Go code runs while a row is measured, and the runtime does not
// preempt a thread in a cgo call. If this column matches bench-c, what
// slows bench-go is not the process around the loop but what happens
// while Go code runs. BENCH_C_IN_GO=1 make bench builds it; output as
// bench-c's.
package main

/*
#cgo CFLAGS: -O2 -I${SRCDIR}/../../c
#cgo LDFLAGS: -libverbs -lpthread
#include <stdio.h>
int bench_c_main(int argc, char **argv);
static int run(int argc, char **argv)
{
	int rc = bench_c_main(argc, argv);
	fflush(stdout);
	return rc;
}
*/
import "C"

import (
	"os"
	"runtime"
)

func main() {
	// bench-c pins the thread it runs on; keep this goroutine on it.
	runtime.LockOSThread()
	// Go memory holding only C pointers may be passed to C.
	argv := make([]*C.char, len(os.Args)+1)
	for i, a := range os.Args {
		argv[i] = C.CString(a)
	}
	os.Exit(int(C.run(C.int(len(os.Args)), &argv[0])))
}
