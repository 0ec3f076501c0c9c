-- How long each step of a finished switch took ({phase, tier, ms}, in order), written with its
-- last receipt: the status page shows a switch's phases, which the metrics only keep as histograms.
ALTER TABLE switch_receipts ADD COLUMN phases jsonb NOT NULL DEFAULT '[]';
