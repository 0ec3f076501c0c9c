-- The newest receipts of every deployment, for `GET /switches` and the status page's hour of
-- switches (polled every 2 s): without it each read sorts the whole table, which is never trimmed.
CREATE INDEX switch_receipts_by_start ON switch_receipts (started_at);
