module github.com/goverbs/goverbs/examples/valkey

go 1.26.0

require (
	github.com/goverbs/goverbs v0.0.0
	github.com/valkey-io/valkey-go v1.0.80
)

require golang.org/x/sys v0.50.0 // indirect

replace github.com/goverbs/goverbs => ../..
