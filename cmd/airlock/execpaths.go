package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/airlockhq/airlock/config"
)

// missingPrograms says, for each exec tool whose program is a relative
// path (./examples/service.sh) that does not exist from the working
// directory, that its runs will fail and why: exec paths are resolved
// from the working directory, not the config file's (the example config
// works from the repository's root only). Programs found on PATH (no
// separator), absolute ones and templated ones are not checked.
func missingPrograms(cfg *config.Config) []string {
	wd, _ := os.Getwd()
	var out []string
	for i, t := range cfg.Tools {
		if t.Exec == nil || len(t.Exec.Command) == 0 {
			continue
		}
		prog := t.Exec.Command[0]
		if filepath.IsAbs(prog) || !strings.ContainsRune(prog, '/') || strings.Contains(prog, "{{") {
			continue
		}
		if _, err := os.Stat(prog); err == nil {
			continue
		}
		out = append(out, fmt.Sprintf("tools[%d].exec.command: %s (tool %s) is not found from the working directory %s, so the tool's runs will fail: exec paths are relative to the working directory, not the config file; start Airlock from the directory the config was written for", i, prog, t.Name, wd))
	}
	return out
}
