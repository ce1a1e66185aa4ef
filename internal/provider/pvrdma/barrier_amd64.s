#include "textflag.h"

// func toDevice()
TEXT ·toDevice(SB), NOSPLIT|NOFRAME, $0-0
	RET

// func full()
TEXT ·full(SB), NOSPLIT|NOFRAME, $0-0
	MFENCE
	RET
