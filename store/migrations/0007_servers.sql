-- The servers that share this store and Temporal, each by the task queue its gateway's steps run
-- on (the waiting requests live in its memory): a switch reaches every one seen lately.
CREATE TABLE servers (
  id text PRIMARY KEY,
  task_queue text NOT NULL,
  last_seen_at timestamptz NOT NULL DEFAULT now()
);

-- What names this store's servers as one group: their workflows' task queue is named after it, so
-- the servers of one store share their workflows, and no other store's servers take them.
CREATE TABLE store_identity (id uuid NOT NULL DEFAULT gen_random_uuid());
INSERT INTO store_identity DEFAULT VALUES;
