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

// func copy64(dst, src unsafe.Pointer)
TEXT ·copy64(SB), NOSPLIT|NOFRAME, $0-16
	MOVQ	dst+0(FP), DI
	MOVQ	src+8(FP), SI
	MOVQ	0(SI), AX
	MOVQ	AX, 0(DI)
	MOVQ	8(SI), AX
	MOVQ	AX, 8(DI)
	MOVQ	16(SI), AX
	MOVQ	AX, 16(DI)
	MOVQ	24(SI), AX
	MOVQ	AX, 24(DI)
	MOVQ	32(SI), AX
	MOVQ	AX, 32(DI)
	MOVQ	40(SI), AX
	MOVQ	AX, 40(DI)
	MOVQ	48(SI), AX
	MOVQ	AX, 48(DI)
	MOVQ	56(SI), AX
	MOVQ	AX, 56(DI)
	RET

// func copyFlush(dst, src unsafe.Pointer, n uintptr)
TEXT ·copyFlush(SB), NOSPLIT|NOFRAME, $0-24
	MOVQ	dst+0(FP), DI
	MOVQ	src+8(FP), SI
	MOVQ	n+16(FP), CX
loop:
	MOVQ	0(SI), AX
	MOVQ	AX, 0(DI)
	MOVQ	8(SI), AX
	MOVQ	AX, 8(DI)
	MOVQ	16(SI), AX
	MOVQ	AX, 16(DI)
	MOVQ	24(SI), AX
	MOVQ	AX, 24(DI)
	MOVQ	32(SI), AX
	MOVQ	AX, 32(DI)
	MOVQ	40(SI), AX
	MOVQ	AX, 40(DI)
	MOVQ	48(SI), AX
	MOVQ	AX, 48(DI)
	MOVQ	56(SI), AX
	MOVQ	AX, 56(DI)
	ADDQ	$64, DI
	ADDQ	$64, SI
	SUBQ	$64, CX
	JA	loop
	SFENCE
	RET
