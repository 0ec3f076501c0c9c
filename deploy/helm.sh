#!/usr/bin/env bash
# Prints the path of a helm binary, providing one when none is there (as temporal.sh does for the
# Temporal CLI): $CAPYCTL_HELM_BIN, a helm on PATH, or .tools/bin/helm built from its Go module
# on first use (about a minute).
set -euo pipefail

version=v3.19.0
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tools="$root/.tools/bin"

if [ -n "${CAPYCTL_HELM_BIN:-}" ]; then
  [ -x "$CAPYCTL_HELM_BIN" ] || { echo "CAPYCTL_HELM_BIN=$CAPYCTL_HELM_BIN is not an executable file" >&2; exit 1; }
  echo "$CAPYCTL_HELM_BIN"
  exit 0
fi
if command -v helm >/dev/null 2>&1; then
  command -v helm
  exit 0
fi
if [ ! -x "$tools/helm" ]; then
  command -v go >/dev/null 2>&1 || { echo "no helm: set CAPYCTL_HELM_BIN, put helm on PATH, or install Go to build it" >&2; exit 1; }
  echo "building helm $version from its Go module into $tools (a minute the first time)" >&2
  mkdir -p "$tools"
  started=$(date +%s)
  GOBIN="$tools" GOFLAGS=-buildvcs=false go install "helm.sh/helm/v3/cmd/helm@$version" >&2
  echo "built helm in $(( $(date +%s) - started )) s" >&2
fi
echo "$tools/helm"
