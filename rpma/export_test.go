package rpma

// Ended returns a channel that is closed once the connection is over, as
// its ID has seen it (cm.ID.Done): what the tests wait for before they
// look at a wait the end must have ended.
func Ended(c *Conn) <-chan struct{} { return c.id.Done() }
