#!/usr/bin/env bash
# Prints the path of the Temporal server itself (what a cluster runs, here on Postgres):
# $CAPYCTL_TEMPORAL_SERVER_BIN, a temporal-server on PATH, or .tools/bin/temporal-server built from
# its Go module on first use. v1.29.1 is the server the CLI of deploy/temporal.sh embeds, so both
# share the module cache and most of the build.
exec bash "$(dirname "${BASH_SOURCE[0]}")/goTool.sh" temporal-server CAPYCTL_TEMPORAL_SERVER_BIN go.temporal.io/server/cmd/server@v1.29.1 "the Temporal server"
