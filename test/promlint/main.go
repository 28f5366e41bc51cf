// hse-promlint: the checks `promtool check metrics` runs, on a scrape read from standard input. promtool's
// "check metrics" is client_golang's promlint (github.com/prometheus/client_golang/prometheus/testutil/promlint)
// over the parsed exposition; this program runs that same linter, pinned in go.mod, without building Prometheus
// itself (see README, "Metrics", for the build times that decided it). Prints each problem as "metric: text" and
// exits 1 when there is any, or when the input is not a valid text exposition; prints the number of metric families
// checked otherwise.
package main

import (
	"bytes"
	"fmt"
	"io"
	"os"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func main() {
	in, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	problems, err := promlint.New(bytes.NewReader(in)).Lint()
	if err != nil {
		fmt.Fprintf(os.Stderr, "error while linting: %v\n", err)
		os.Exit(1)
	}
	for _, p := range problems {
		fmt.Printf("%s: %s\n", p.Metric, p.Text)
	}
	if len(problems) > 0 {
		os.Exit(1)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(in))
	if err != nil {
		fmt.Fprintf(os.Stderr, "not a valid text exposition: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("%d metric families, no problems\n", len(families))
}
