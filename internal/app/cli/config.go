package cli

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
)

// EnvName is the environment variable of a flag: CHIME_ and the flag's
// name in upper case with dashes as underscores (--node-id: CHIME_NODE_ID).
func EnvName(flag string) string {
	return "CHIME_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// applyConfig fills every flag of cmd that was not given on the command
// line from its environment variable, else from the YAML file named by
// --config (or CHIME_CONFIG), whose keys are the flag names. Flags beat the
// environment, which beats the file, which beats the defaults.
func applyConfig(cmd *cobra.Command, file string) error {
	if file == "" {
		file = os.Getenv(EnvName("config"))
	}
	values := map[string]any{}
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return fmt.Errorf("config: %w", err)
		}
		if err := yaml.Unmarshal(b, &values); err != nil {
			return fmt.Errorf("config %s: %w", file, err)
		}
		for k := range values {
			if cmd.Flags().Lookup(k) == nil {
				return fmt.Errorf("config %s: unknown key %q", file, k)
			}
		}
	}
	var err error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed || f.Name == "config" {
			return
		}
		if v, ok := os.LookupEnv(EnvName(f.Name)); ok {
			if serr := f.Value.Set(v); serr != nil {
				err = fmt.Errorf("%s (--%s): %w", EnvName(f.Name), f.Name, serr)
			}
			return
		}
		if v, ok := values[f.Name]; ok {
			if serr := setFromYAML(f, v); serr != nil {
				err = fmt.Errorf("config key %s: %w", f.Name, serr)
			}
		}
	})
	return err
}

func setFromYAML(f *pflag.Flag, v any) error {
	if list, ok := v.([]any); ok {
		for _, item := range list {
			if err := f.Value.Set(fmt.Sprint(item)); err != nil {
				return err
			}
		}
		return nil
	}
	return f.Value.Set(fmt.Sprint(v))
}
