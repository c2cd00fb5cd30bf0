#!/bin/sh
# Creates Prefect's database beside MLflow's (POSTGRES_DB) on the first start of the volume.
# MLflow and Prefect both keep an alembic_version table, so they cannot share one database.
set -e
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
     --set db="${PREFECT_DB:-prefect}" <<'SQL'
SELECT format('CREATE DATABASE %I', :'db')
WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = :'db')\gexec
SQL
