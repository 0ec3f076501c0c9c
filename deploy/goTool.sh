#!/usr/bin/env bash
# Prints the path of a tool built from a Go module, providing it when none is there:
#   1. the file the environment variable VAR names, when set;
#   2. the tool on PATH;
#   3. .tools/bin/NAME, built with `go install MODULE@VERSION` on first use (renamed to NAME when the
#      package's own name says less, as cmd/server does).
# Usage: goTool.sh NAME VAR MODULE@VERSION "what it is, for the messages"
set -euo pipefail

name=$1 var=$2 module=$3 what=$4
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tools="$root/.tools/bin"

if [ -n "${!var:-}" ]; then
  [ -x "${!var}" ] || { echo "$var=${!var} is not an executable file" >&2; exit 1; }
  echo "${!var}"
  exit 0
fi
if command -v "$name" >/dev/null 2>&1; then
  command -v "$name"
  exit 0
fi
if [ ! -x "$tools/$name" ]; then
  command -v go >/dev/null 2>&1 || { echo "no $what: set $var, put $name on PATH, or install Go to build it" >&2; exit 1; }
  echo "building $what ${module##*@} from its Go module into $tools (minutes the first time)" >&2
  mkdir -p "$tools"
  started=$(date +%s)
  built=$(mktemp -d "$tools/.build.XXXXXX")
  trap 'rm -rf "$built"' EXIT
  GOBIN="$built" GOFLAGS=-buildvcs=false go install "$module" >&2
  package=${module%@*}
  mv "$built/${package##*/}" "$tools/$name"
  echo "built $what in $(( $(date +%s) - started )) s" >&2
fi
echo "$tools/$name"
