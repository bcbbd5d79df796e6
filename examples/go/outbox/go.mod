module example.com/werk-outbox

go 1.19

require (
	github.com/jackc/pgx/v4 v4.18.1
	github.com/werk-dev/werk/client/go v0.0.0
)

replace github.com/werk-dev/werk/client/go => ../../../client/go
