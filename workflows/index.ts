export * from './switch.js';
export * from './hostScheduler.js';
export * from './measure.js';
