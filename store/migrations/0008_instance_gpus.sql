-- The GPUs of its host each instance holds (an instance may span several, each holding an even share
-- of its bytes): placement and the listings count memory per GPU. Empty when not known, as for a row
-- written before the store recorded them: such an instance may be on any of its host's GPUs.
ALTER TABLE instances ADD COLUMN gpu_indexes integer[] NOT NULL DEFAULT '{}';
