-- The catalogue: what exists and what was decided. Portable SQL: it runs on Postgres and on PGlite.
-- States, tiers and outcomes are validated in code against domain/vocabulary.ts, not here.

CREATE TABLE deployments (
  id               text PRIMARY KEY,              -- a ULID
  name             text NOT NULL UNIQUE,
  revision         integer NOT NULL,              -- the current revision
  operator_stopped boolean NOT NULL DEFAULT false,
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now()
);

-- Each changed spec is a new revision; its checkpoint measurement is null until measured.
CREATE TABLE deployment_revisions (
  deployment_id text NOT NULL REFERENCES deployments (id) ON DELETE CASCADE,
  revision      integer NOT NULL,
  spec          jsonb NOT NULL,
  checkpoint    jsonb,
  measured_at   timestamptz,
  created_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (deployment_id, revision)
);

CREATE TABLE hosts (
  id             text PRIMARY KEY,
  gpus           jsonb NOT NULL DEFAULT '[]',
  host_ram_bytes bigint,
  settings       jsonb NOT NULL DEFAULT '{}',      -- the host's queue limits and activation
  draining       boolean NOT NULL DEFAULT false,
  registered_at  timestamptz NOT NULL DEFAULT now(),
  last_seen_at   timestamptz NOT NULL DEFAULT now()
);

-- Tokens a host registers with; only their SHA-256 is kept.
CREATE TABLE host_tokens (
  token_sha256 text PRIMARY KEY,
  host_id      text,                               -- null until a host registers with it
  created_at   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE instances (
  deployment_id  text NOT NULL REFERENCES deployments (id) ON DELETE CASCADE,
  instance_index integer NOT NULL,
  host_id        text NOT NULL REFERENCES hosts (id),
  generation     integer NOT NULL,                 -- bumped by every start of its engine
  observed_state text NOT NULL,
  park_tier      text,
  gpu_bytes      bigint NOT NULL DEFAULT 0,
  host_ram_bytes bigint NOT NULL DEFAULT 0,
  updated_at     timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (deployment_id, instance_index)
);
CREATE INDEX instances_by_host ON instances (host_id);

-- An instance's answer to the wake check when it first became ready.
CREATE TABLE wake_references (
  deployment_id  text NOT NULL REFERENCES deployments (id) ON DELETE CASCADE,
  instance_index integer NOT NULL,
  revision       integer NOT NULL,
  generation     integer NOT NULL,
  probe          jsonb NOT NULL,
  answer         jsonb NOT NULL,
  recorded_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (deployment_id, instance_index)
);

CREATE TABLE switch_receipts (
  switch_id            text PRIMARY KEY,
  host_id              text NOT NULL,
  target_deployment_id text,
  victims              jsonb NOT NULL DEFAULT '[]',
  outcome              text NOT NULL,
  summary              text NOT NULL,
  started_at           timestamptz NOT NULL,
  finished_at          timestamptz
);
CREATE INDEX switch_receipts_by_target ON switch_receipts (target_deployment_id, started_at);
