#!/usr/bin/env bash
# Prints the path of a Temporal CLI (whose `server start-dev` is the real Temporal server with its
# Web UI): $CAPYCTL_TEMPORAL_BIN, a `temporal` on PATH, or .tools/bin/temporal built on first use.
# v1.5.1 is the newest tag that `go install` accepts: from v1.6 on, the module has a replace directive.
exec bash "$(dirname "${BASH_SOURCE[0]}")/goTool.sh" temporal CAPYCTL_TEMPORAL_BIN github.com/temporalio/cli/cmd/temporal@v1.5.1 "the Temporal CLI"
