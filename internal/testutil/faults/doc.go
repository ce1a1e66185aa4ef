// Package faults holds goverbs' fault tests: two hosts joined by one link
// (hack/vm/two-host.sh, make faults), a lossy, duplicating, reordering or
// slow link (netem), a link that goes down and comes back, a peer process
// killed mid-stream and a peer VM powered off, under an RC verbs stream
// (stream_test.go), an rpma write+flush stream (rpma_test.go) and rdma_cm
// connections (cm_test.go). The tests check that every posted work request
// completes exactly once, successfully with its data verified or with an
// error status, within the retry budget the QP was configured with (the
// cm's own budget for connects and disconnects), that the break of a
// connection is reported, and that the survivor's kernel objects, file
// descriptors and goroutines return to their baseline.
//
// The package has no API; everything is in its tests. The same test binary
// runs on both VMs: on VM a (GOVERBS_FAULT_ROLE=a) each test drives the
// workload and injects the fault, on VM b the test of the same name serves
// as the peer. Anywhere else the tests skip, unless
// GOVERBS_REQUIRE_TWO_HOST=1 says the two-host test bed must be there.
package faults
