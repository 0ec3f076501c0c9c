#!/usr/bin/env bash
# Prints the folder of the Go module a binary was built from (at the version it was built from, read
# from its build information; fetched into the module cache when the cache lacks it): the Temporal
# server's holds its config/docker.yaml and its schema files (schema/postgresql/v12, what
# temporal-schema.sh's SCHEMA_DIR names), the UI server's its config/docker.yaml and its assets.
# Usage: moduleOf.sh BINARY
set -euo pipefail

module=$(go version -m "$1" | awk '$1 == "mod" { print $2 "@" $3 }')
[ -n "$module" ] || { echo "$1 names no Go module in its build information" >&2; exit 1; }
go mod download -json "$module" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p'
