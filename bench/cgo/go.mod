module github.com/goverbs/goverbs/bench/cgo

go 1.26
