#!/usr/bin/env bash
# Prints the path of a helm binary: $CAPYCTL_HELM_BIN, a helm on PATH, or .tools/bin/helm built from
# its Go module on first use (about a minute).
exec bash "$(dirname "${BASH_SOURCE[0]}")/goTool.sh" helm CAPYCTL_HELM_BIN helm.sh/helm/v3/cmd/helm@v3.19.0 helm
