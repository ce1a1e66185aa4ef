package common

// GlibcRand returns glibc's rand() after srand(seed): the additive
// feedback generator of random(3) with its default 128-byte state (TYPE_3:
// x[i] = x[i-3] + x[i-31], the first 310 outputs discarded, each output
// shifted right by one), so that a seed names the same person as the C
// client.
func GlibcRand(seed uint32) func() int32 {
	if seed == 0 {
		seed = 1
	}
	r := make([]uint32, 0, 400)
	r = append(r, seed)
	for i := 1; i < 31; i++ {
		word := int64(int32(r[i-1]))
		hi, lo := word/127773, word%127773
		word = 16807*lo - 2836*hi
		if word < 0 {
			word += 2147483647
		}
		r = append(r, uint32(int32(word)))
	}
	for i := 31; i < 34; i++ {
		r = append(r, r[i-31])
	}
	next := func() uint32 {
		n := len(r)
		v := r[n-31] + r[n-3]
		r = append(r[1:], v) // keep the last 34 values; the window slides
		return v
	}
	for range 310 {
		next()
	}
	return func() int32 { return int32(next() >> 1) }
}
