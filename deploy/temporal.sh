#!/usr/bin/env bash
# Prints the path of a Temporal CLI (whose `server start-dev` is the real Temporal server with its
# Web UI), providing one when none is there:
#   1. $CAPYCTL_TEMPORAL_BIN, when set;
#   2. a `temporal` on PATH;
#   3. .tools/bin/temporal, built from the Go module on first use.
# v1.5.1 is the newest tag that `go install` accepts: from v1.6 on, the module has a replace directive.
set -euo pipefail

version=v1.5.1
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tools="$root/.tools/bin"

if [ -n "${CAPYCTL_TEMPORAL_BIN:-}" ]; then
  [ -x "$CAPYCTL_TEMPORAL_BIN" ] || { echo "CAPYCTL_TEMPORAL_BIN=$CAPYCTL_TEMPORAL_BIN is not an executable file" >&2; exit 1; }
  echo "$CAPYCTL_TEMPORAL_BIN"
  exit 0
fi
if command -v temporal >/dev/null 2>&1; then
  command -v temporal
  exit 0
fi
if [ ! -x "$tools/temporal" ]; then
  command -v go >/dev/null 2>&1 || { echo "no Temporal CLI: set CAPYCTL_TEMPORAL_BIN, put temporal on PATH, or install Go to build it" >&2; exit 1; }
  echo "building the Temporal CLI $version from its Go module into $tools (minutes the first time)" >&2
  mkdir -p "$tools"
  started=$(date +%s)
  GOBIN="$tools" GOFLAGS=-buildvcs=false go install "github.com/temporalio/cli/cmd/temporal@$version" >&2
  echo "built the Temporal CLI in $(( $(date +%s) - started )) s" >&2
fi
echo "$tools/temporal"
