#!/usr/bin/env bash
# Once Temporal answers: the namespace capyctl runs in, and the search attributes every switch
# carries (workflows/definitions.ts), so the Web UI can list "every switch that parked chat-a".
# Creating an attribute that exists with the same type succeeds, so this runs again unchanged.
set -euo pipefail

temporal operator namespace describe -n "$NAMESPACE" >/dev/null 2>&1 \
  || temporal operator namespace create -n "$NAMESPACE" --retention "$RETENTION"
temporal operator search-attribute create -n "$NAMESPACE" --name CapyTarget --name CapyHost --name CapyOutcome --type Keyword
temporal operator search-attribute create -n "$NAMESPACE" --name CapyVictims --type KeywordList
