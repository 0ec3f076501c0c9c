/**
 * Where the standalone keeps its data when its document names no `data_dir`; the CLI looks for the
 * admin token there.
 */
export const DEFAULT_DATA_DIR = '.data';
