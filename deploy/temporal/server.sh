#!/usr/bin/env bash
# Runs the Temporal server (frontend, history, matching and worker in one process) until stopped, on
# the databases temporal-schema.sh set up: its release's own config/docker.yaml, the file the
# temporalio/server image runs, so the same variables as deploy/compose (DB, POSTGRES_SEEDS, DB_PORT,
# POSTGRES_USER, POSTGRES_PWD, DBNAME, VISIBILITY_DBNAME; BIND_ON_IP, TEMPORAL_BROADCAST_ADDRESS, the
# ports FRONTEND_GRPC_PORT, … and any other that file reads), with capyctl's dynamic configuration
# unless DYNAMIC_CONFIG_FILE_PATH names another. It replaces this script (exec): a signal reaches it.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
server=$(bash "$here/../temporalServer.sh")
module=$(bash "$here/moduleOf.sh" "$server")
export DYNAMIC_CONFIG_FILE_PATH=${DYNAMIC_CONFIG_FILE_PATH:-$here/dynamicconfig.yaml}
exec "$server" --root "$module" --config config --env docker --allow-no-auth start
