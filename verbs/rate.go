package verbs

import "strconv"

// Rate is a static injection rate (enum ibv_rate): the value AHAttr.StaticRate
// carries. RateMax (0) means "no limit, the port's rate".
type Rate uint8

// The rates of enum ibv_rate (rdma-core verbs.h); the numbering is the IBTA's,
// not in speed order.
const (
	RateMax      Rate = 0
	Rate2_5Gbps  Rate = 2
	Rate5Gbps    Rate = 5
	Rate10Gbps   Rate = 3
	Rate20Gbps   Rate = 6
	Rate30Gbps   Rate = 4
	Rate40Gbps   Rate = 7
	Rate60Gbps   Rate = 8
	Rate80Gbps   Rate = 9
	Rate120Gbps  Rate = 10
	Rate14Gbps   Rate = 11
	Rate56Gbps   Rate = 12
	Rate112Gbps  Rate = 13
	Rate168Gbps  Rate = 14
	Rate25Gbps   Rate = 15
	Rate100Gbps  Rate = 16
	Rate200Gbps  Rate = 17
	Rate300Gbps  Rate = 18
	Rate28Gbps   Rate = 19
	Rate50Gbps   Rate = 20
	Rate400Gbps  Rate = 21
	Rate600Gbps  Rate = 22
	Rate800Gbps  Rate = 23
	Rate1200Gbps Rate = 24
)

// rateInfo is one row of libibverbs' rate tables: the multiple of 2.5 Gb/s
// (0 where ibv_rate_to_mult has no entry: the FDR/EDR/HDR lane rates), the
// exact data rate in Mb/s, and the name.
type rateInfo struct {
	mult int
	mbps int
	name string
}

var rates = [...]rateInfo{
	Rate2_5Gbps:  {1, 2500, "2.5 Gbps"},
	Rate5Gbps:    {2, 5000, "5 Gbps"},
	Rate10Gbps:   {4, 10000, "10 Gbps"},
	Rate20Gbps:   {8, 20000, "20 Gbps"},
	Rate30Gbps:   {12, 30000, "30 Gbps"},
	Rate40Gbps:   {16, 40000, "40 Gbps"},
	Rate60Gbps:   {24, 60000, "60 Gbps"},
	Rate80Gbps:   {32, 80000, "80 Gbps"},
	Rate120Gbps:  {48, 120000, "120 Gbps"},
	Rate14Gbps:   {0, 14062, "14 Gbps"},
	Rate56Gbps:   {0, 56250, "56 Gbps"},
	Rate112Gbps:  {0, 112500, "112 Gbps"},
	Rate168Gbps:  {0, 168750, "168 Gbps"},
	Rate25Gbps:   {0, 25781, "25 Gbps"},
	Rate100Gbps:  {0, 103125, "100 Gbps"},
	Rate200Gbps:  {0, 206250, "200 Gbps"},
	Rate300Gbps:  {0, 309375, "300 Gbps"},
	Rate28Gbps:   {11, 28125, "28 Gbps"},
	Rate50Gbps:   {20, 53125, "50 Gbps"},
	Rate400Gbps:  {160, 425000, "400 Gbps"},
	Rate600Gbps:  {240, 637500, "600 Gbps"},
	Rate800Gbps:  {320, 850000, "800 Gbps"},
	Rate1200Gbps: {480, 1275000, "1200 Gbps"},
}

func (r Rate) info() (rateInfo, bool) {
	if int(r) >= len(rates) || rates[r].mbps == 0 {
		return rateInfo{}, false
	}
	return rates[r], true
}

// Mult returns the rate as a multiple of 2.5 Gb/s, or -1 for RateMax, an
// unknown value, and the lane rates that are no such multiple (14, 56, 112,
// 168, 25, 100, 200, 300 Gb/s): ibv_rate_to_mult.
func (r Rate) Mult() int {
	if i, ok := r.info(); ok && i.mult != 0 {
		return i.mult
	}
	return -1
}

// Mbps returns the data rate in Mb/s (the exact figure, 103125 for
// Rate100Gbps), or -1 for RateMax and unknown values: ibv_rate_to_mbps.
func (r Rate) Mbps() int {
	if i, ok := r.info(); ok {
		return i.mbps
	}
	return -1
}

// String names the rate ("2.5 Gbps"), "max" for RateMax.
func (r Rate) String() string {
	if r == RateMax {
		return "max"
	}
	if i, ok := r.info(); ok {
		return i.name
	}
	return "Rate(" + strconv.Itoa(int(r)) + ")"
}

// RateFromMult returns the rate that is mult times 2.5 Gb/s, or RateMax if
// there is none: mult_to_ibv_rate.
func RateFromMult(mult int) Rate {
	for r, i := range rates {
		if i.mult != 0 && i.mult == mult {
			return Rate(r)
		}
	}
	return RateMax
}

// RateFromMbps returns the rate whose exact data rate is mbps Mb/s (as
// Rate.Mbps reports it), or RateMax if there is none: mbps_to_ibv_rate.
func RateFromMbps(mbps int) Rate {
	for r, i := range rates {
		if i.mbps != 0 && i.mbps == mbps {
			return Rate(r)
		}
	}
	return RateMax
}
