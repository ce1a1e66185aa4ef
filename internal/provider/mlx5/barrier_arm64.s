#include "textflag.h"

// func toDevice()
TEXT ·toDevice(SB), NOSPLIT|NOFRAME, $0-0
	DSB	$0xe // DSB ST
	RET

// func fromDevice()
TEXT ·fromDevice(SB), NOSPLIT|NOFRAME, $0-0
	DSB	$0xd // DSB LD
	RET

// func wcStart()
TEXT ·wcStart(SB), NOSPLIT|NOFRAME, $0-0
	DSB	$0xe // DSB ST
	RET

// func wcFlush()
TEXT ·wcFlush(SB), NOSPLIT|NOFRAME, $0-0
	DSB	$0xe // DSB ST
	RET

// func full()
TEXT ·full(SB), NOSPLIT|NOFRAME, $0-0
	DSB	$0xf // DSB SY
	RET

// func store64(p *uint64, v uint64)
TEXT ·store64(SB), NOSPLIT|NOFRAME, $0-16
	MOVD	p+0(FP), R0
	MOVD	v+8(FP), R1
	MOVD	R1, (R0)
	RET

// func copy64(dst, src unsafe.Pointer)
TEXT ·copy64(SB), NOSPLIT|NOFRAME, $0-16
	MOVD	dst+0(FP), R0
	MOVD	src+8(FP), R1
	VLD1	(R1), [V0.D2, V1.D2, V2.D2, V3.D2]
	VST1	[V0.D2, V1.D2, V2.D2, V3.D2], (R0)
	RET

// func wcStartLocked()
TEXT ·wcStartLocked(SB), NOSPLIT|NOFRAME, $0-0
	DSB	$0xe // DSB ST
	RET
