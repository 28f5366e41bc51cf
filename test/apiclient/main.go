// hse-apiclient: drives hse's remote API with the official Go client for Tailscale's API
// (tailscale.com/client/tailscale/v2, pinned in go.mod), pointed at hse by its base URL only. The ava test
// (test/api/api-client.test.ts) runs one command at a time and reads the JSON it prints; an API error prints
// {"error": ..., "status": N} and exits 1.
//
//	hse-apiclient -base http://127.0.0.1:8080 -key hse-api-... <command> [args]
//
// Commands: devices | device <id> | create-key <tag> | keys | get-policy | set-policy <file> | validate-policy <file>
// | routes <id> | set-routes <id> <prefix>... | set-nameservers <ip>... | nameservers | delete-device <id> | users
// | settings
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"time"

	tailscale "tailscale.com/client/tailscale/v2"
)

func main() {
	base := flag.String("base", "", "hse's public URL")
	key := flag.String("key", "", "an hse API key")
	flag.Parse()
	u, err := url.Parse(*base)
	if err != nil || *base == "" || *key == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: hse-apiclient -base URL -key KEY <command> [args]")
		os.Exit(2)
	}
	c := &tailscale.Client{BaseURL: u, APIKey: *key}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := run(ctx, c, flag.Arg(0), flag.Args()[1:])
	if err != nil {
		status := 0
		var apiErr tailscale.APIError
		if errors.As(err, &apiErr) {
			status = apiErr.Status
		}
		emit(map[string]any{"error": err.Error(), "status": status})
		os.Exit(1)
	}
	emit(out)
}

func emit(v any) {
	b, _ := json.Marshal(v)
	fmt.Println(string(b))
}

func run(ctx context.Context, c *tailscale.Client, cmd string, args []string) (any, error) {
	arg := func(i int) string {
		if i >= len(args) {
			fmt.Fprintf(os.Stderr, "%s: missing argument %d\n", cmd, i+1)
			os.Exit(2)
		}
		return args[i]
	}
	switch cmd {
	case "devices":
		return c.Devices().List(ctx, tailscale.WithFields(tailscale.IncludeFieldsAll))
	case "device":
		return c.Devices().GetWithAllFields(ctx, arg(0))
	case "create-key":
		var req tailscale.CreateKeyRequest
		req.Capabilities.Devices.Create.Preauthorized = true
		req.Capabilities.Devices.Create.Tags = []string{arg(0)}
		req.ExpirySeconds = 3600
		req.Description = "made by hse-apiclient"
		return c.Keys().CreateAuthKey(ctx, req)
	case "keys":
		return c.Keys().List(ctx, false)
	case "get-policy":
		return c.PolicyFile().Raw(ctx)
	case "get-policy-json":
		return c.PolicyFile().Get(ctx)
	case "set-policy":
		text, err := os.ReadFile(arg(0))
		if err != nil {
			return nil, err
		}
		cur, err := c.PolicyFile().Raw(ctx)
		if err != nil {
			return nil, err
		}
		if err := c.PolicyFile().Set(ctx, string(text), cur.ETag); err != nil {
			return nil, err
		}
		return c.PolicyFile().Raw(ctx)
	case "set-policy-stale":
		// Sets the policy with an ETag that is no longer current: hse must refuse it (412).
		text, err := os.ReadFile(arg(0))
		if err != nil {
			return nil, err
		}
		return nil, c.PolicyFile().Set(ctx, string(text), arg(1))
	case "validate-policy":
		text, err := os.ReadFile(arg(0))
		if err != nil {
			return nil, err
		}
		if err := c.PolicyFile().Validate(ctx, string(text)); err != nil {
			return map[string]any{"valid": false, "message": err.Error()}, nil
		}
		return map[string]any{"valid": true}, nil
	case "routes":
		return c.Devices().SubnetRoutes(ctx, arg(0))
	case "set-routes":
		if err := c.Devices().SetSubnetRoutes(ctx, arg(0), args[1:]); err != nil {
			return nil, err
		}
		return c.Devices().SubnetRoutes(ctx, arg(0))
	case "set-nameservers":
		if err := c.DNS().SetNameservers(ctx, args); err != nil {
			return nil, err
		}
		return c.DNS().Nameservers(ctx)
	case "nameservers":
		return c.DNS().Nameservers(ctx)
	case "delete-device":
		return map[string]bool{"deleted": true}, c.Devices().Delete(ctx, arg(0))
	case "users":
		return c.Users().List(ctx, nil, nil)
	case "settings":
		return c.TailnetSettings().Get(ctx)
	}
	fmt.Fprintf(os.Stderr, "unknown command %q\n", cmd)
	os.Exit(2)
	return nil, nil
}
