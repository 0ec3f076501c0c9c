-- A deployment's last problem (an engine that exited unasked, a start, park or wake that failed, in the
-- words of what failed, as domain/problems.ts shapes it), how many times its engine ended unasked, and
-- when the last few of those were: a crash loop is read from them.
ALTER TABLE deployments ADD COLUMN last_problem jsonb;
ALTER TABLE deployments ADD COLUMN restarts integer NOT NULL DEFAULT 0;
ALTER TABLE deployments ADD COLUMN recent_endings timestamptz[] NOT NULL DEFAULT '{}';
