export * from './switch.js';
export * from './hostScheduler/workflow.js';
export * from './measure.js';
