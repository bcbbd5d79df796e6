module github.com/werk-dev/werk/bench/peers/go

go 1.19

require github.com/werk-dev/werk/client/go v0.0.0

replace github.com/werk-dev/werk/client/go => ../../../client/go
