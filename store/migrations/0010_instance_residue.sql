-- What a parked instance's engine still holds on its GPUs, measured by its host after the park (all its
-- GPUs together): the ledger counts it instead of the checkpoint's reserved residue. NULL when not
-- measured: not parked, parked before residues were measured, or the host could not read its devices.
ALTER TABLE instances ADD COLUMN residue_bytes bigint;
