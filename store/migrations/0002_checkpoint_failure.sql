-- Why the latest measurement of a revision's checkpoint failed (the host could not read it); null
-- while none failed. A measurement that succeeds, or one started again, clears it.
ALTER TABLE deployment_revisions ADD COLUMN measure_failure text;
