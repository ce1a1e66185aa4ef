// bench-c's whole program, its main renamed, compiled into this cgo
// program once (with the shared set-up).
#define main bench_c_main
#include "../../c/main.c"
#undef main
#include "../../c/bench.c"
