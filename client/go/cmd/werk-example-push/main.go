// Pushes COUNT "echo" jobs (args [i, "from-go"]) to QUEUE with the Go client and prints
// {"created": n, "jids": [...]}. Used by the cross-language tests; also a minimal example.
package main

import (
	"context"
	"encoding/json"
	"log"
	"os"
	"strconv"

	werk "github.com/werk-dev/werk/client/go"
)

func main() {
	count, err := strconv.Atoi(os.Getenv("COUNT"))
	if err != nil {
		count = 10
	}
	specs := make([]werk.JobSpec, count)
	for i := range specs {
		specs[i] = werk.JobSpec{JobType: "echo", Args: []any{i, "from-go"}, Queue: os.Getenv("QUEUE")}
	}
	result, err := werk.NewClient("").PushMany(context.Background(), specs)
	if err != nil {
		log.Fatal(err)
	}
	jids := make([]string, len(result.Jobs))
	for i, j := range result.Jobs {
		jids[i] = j.JID
	}
	_ = json.NewEncoder(os.Stdout).Encode(map[string]any{"created": result.Created, "jids": jids})
}
