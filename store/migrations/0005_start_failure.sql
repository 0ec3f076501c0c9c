-- Why the deployment's latest start failed, in the words of what failed (an engine that exited
-- leaves its last lines of stderr here); null while its latest start has not failed.
ALTER TABLE deployments ADD COLUMN start_failure text;
