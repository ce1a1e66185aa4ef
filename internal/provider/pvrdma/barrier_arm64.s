#include "textflag.h"

// func toDevice()
TEXT ·toDevice(SB), NOSPLIT|NOFRAME, $0-0
	DSB	$0xe // DSB ST
	RET

// func full()
TEXT ·full(SB), NOSPLIT|NOFRAME, $0-0
	DSB	$0xf // DSB SY
	RET
