module github.com/goverbs/goverbs/rsocket/nettest

go 1.26.0

require github.com/goverbs/goverbs v0.0.0

require (
	golang.org/x/net v0.62.0
	golang.org/x/sys v0.49.0 // indirect
)

replace github.com/goverbs/goverbs => ../..
