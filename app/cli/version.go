package cli

import (
	"context"
	"fmt"
)

// Version prints the build's version.
func Version(_ context.Context, env Env, _ []string) error {
	_, err := fmt.Fprintln(env.Stdout, "rxgate", env.Version)
	return err
}
