#!/usr/bin/env bash
# Once Temporal answers: the namespace capyctl runs in, and the search attributes every switch
# carries (workflows/definitions.ts), so the Web UI can list "every switch that parked chat-a".
# Creating an attribute that exists with the same type succeeds, so this runs again unchanged.
# One attribute per command: the CLI (1.5) given several --name creates only the first.
set -euo pipefail

attributes() {
  temporal operator search-attribute create -n "$NAMESPACE" --name CapyTarget --type Keyword \
    && temporal operator search-attribute create -n "$NAMESPACE" --name CapyVictims --type KeywordList \
    && temporal operator search-attribute create -n "$NAMESPACE" --name CapyHost --type Keyword \
    && temporal operator search-attribute create -n "$NAMESPACE" --name CapyOutcome --type Keyword
}

temporal operator namespace describe -n "$NAMESPACE" >/dev/null 2>&1 \
  || temporal operator namespace create -n "$NAMESPACE" --retention "$RETENTION"
# A namespace just created reaches every frontend's cache within seconds; until then it is "not found".
for attempt in $(seq 60); do
  attributes && exit 0
  echo "namespace $NAMESPACE not ready (attempt $attempt); retrying in 1 s" >&2
  sleep 1
done
exit 1
