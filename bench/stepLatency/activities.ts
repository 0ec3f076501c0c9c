export const noopActivities = {
  async noop(): Promise<number> {
    return Date.now();
  },
};
export type NoopActivities = typeof noopActivities;
