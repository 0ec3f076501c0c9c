#!/usr/bin/env bash
# Prints the path of the Temporal server's SQL schema tool, which creates its databases and sets up
# their schema (embedded in the tool): $CAPYCTL_TEMPORAL_SQL_TOOL_BIN, a temporal-sql-tool on PATH, or
# .tools/bin/temporal-sql-tool built from the server's Go module on first use, at the server's version.
exec bash "$(dirname "${BASH_SOURCE[0]}")/goTool.sh" temporal-sql-tool CAPYCTL_TEMPORAL_SQL_TOOL_BIN go.temporal.io/server/cmd/tools/sql@v1.29.1 "the Temporal SQL schema tool"
