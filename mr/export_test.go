package mr

// CheckMR and CheckMW tell the tests whether an object is closed.
var (
	CheckMR = (*MR).check
	CheckMW = (*MW).check
)
