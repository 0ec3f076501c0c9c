#!/usr/bin/env bash
# Runs Temporal's Web UI for a Temporal server until stopped: the UI server of deploy/temporalUiServer.sh
# with its release's own config/docker.yaml (the file the temporalio/ui image runs), so its variables:
# TEMPORAL_ADDRESS (the frontend, 127.0.0.1:7233 by default) and TEMPORAL_UI_PORT (8080 by default),
# on every interface. It replaces this script (exec): a signal reaches it.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ui=$(bash "$here/../temporalUiServer.sh")
exec "$ui" --root "$(bash "$here/moduleOf.sh" "$ui")" --config config --env docker start
