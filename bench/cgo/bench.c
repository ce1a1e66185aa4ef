// The shared set-up of the C micro-benchmark, compiled into this cgo
// program once.
#include "../c/bench.c"
