#!/usr/bin/env bash
# Creates Temporal's two databases on its Postgres and brings their schemas to this release's
# version: the same steps as Temporal's auto-setup image, run once before the server starts (and
# harmless to run again: each step leaves a database that is already there as it is).
# The visibility database is Postgres 12+ SQL visibility, which holds custom search attributes.
set -euo pipefail

# The admin-tools image's schema files, unless SCHEMA_DIR names the same release's elsewhere (the
# tests take them from the server's Go module).
schemas=${SCHEMA_DIR:-/etc/temporal/schema/postgresql/v12}
sql=(temporal-sql-tool --plugin "$DB" --ep "$POSTGRES_SEEDS" -p "$DB_PORT" -u "$POSTGRES_USER")
export SQL_PASSWORD=$POSTGRES_PWD

for db in "$DBNAME:temporal" "$VISIBILITY_DBNAME:visibility"; do
  name=${db%%:*}
  "${sql[@]}" --db "$name" create
  "${sql[@]}" --db "$name" setup-schema -v 0.0
  "${sql[@]}" --db "$name" update-schema -d "$schemas/${db##*:}/versioned"
done
