#!/usr/bin/env bash
# Prints the path of Temporal's Web UI server (what a cluster runs beside the Temporal server; the
# dev server has its own built in): $CAPYCTL_TEMPORAL_UI_SERVER_BIN, a temporal-ui-server on PATH, or
# .tools/bin/temporal-ui-server built from its Go module on first use. v2.42.1 is the UI the CLI of
# deploy/temporal.sh embeds, so both share the module cache (the UI's assets are in the module).
exec bash "$(dirname "${BASH_SOURCE[0]}")/goTool.sh" temporal-ui-server CAPYCTL_TEMPORAL_UI_SERVER_BIN github.com/temporalio/ui-server/v2/cmd/server@v2.42.1 "the Temporal Web UI server"
