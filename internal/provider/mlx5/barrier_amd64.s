#include "textflag.h"

// func toDevice()
TEXT ·toDevice(SB), NOSPLIT|NOFRAME, $0-0
	RET

// func fromDevice()
TEXT ·fromDevice(SB), NOSPLIT|NOFRAME, $0-0
	LFENCE
	RET

// func wcStart()
TEXT ·wcStart(SB), NOSPLIT|NOFRAME, $0-0
	SFENCE
	RET

// func wcFlush()
TEXT ·wcFlush(SB), NOSPLIT|NOFRAME, $0-0
	SFENCE
	RET

// func full()
TEXT ·full(SB), NOSPLIT|NOFRAME, $0-0
	MFENCE
	RET

// func store64(p *uint64, v uint64)
TEXT ·store64(SB), NOSPLIT|NOFRAME, $0-16
	MOVQ	p+0(FP), AX
	MOVQ	v+8(FP), BX
	MOVQ	BX, (AX)
	RET
