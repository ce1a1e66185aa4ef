package cq_test

// Pairs on iWARP devices (siw) connect through rdma_cm.
import _ "github.com/goverbs/goverbs/internal/testutil/cmpair"
