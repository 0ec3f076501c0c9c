/**
 * The log level of the routes something polls: the status page's reads (four every 2 s per open
 * page), each host's samples (about one a second) and Prometheus's scrapes. Only what fails is worth
 * a line there: an info line each would bury everything else.
 */
export const POLLED_LOG_LEVEL = 'warn';
