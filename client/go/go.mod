module github.com/werk-dev/werk/client/go

go 1.19
