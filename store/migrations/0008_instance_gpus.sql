-- Which of its host's GPUs each instance holds (an instance may span several): placement, the load
-- endpoint and the metrics count memory per GPU. Empty for one that holds none, and for rows written
-- before, whose GPUs are not known (placement then counts them against every GPU of the host).
ALTER TABLE instances ADD COLUMN gpu_indexes integer[] NOT NULL DEFAULT '{}';
