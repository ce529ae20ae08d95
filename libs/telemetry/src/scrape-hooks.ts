import { Injectable } from '@nestjs/common';

export type ScrapeHook = () => Promise<void>;

/**
 * Gauges read from PostgreSQL or Redis are refreshed when /metrics is scraped, not on a timer:
 * a feature registers a hook that sets its gauges. A slow or failing hook does not fail the scrape.
 */
@Injectable()
export class ScrapeHooks {
  private readonly hooks = new Map<string, ScrapeHook>();

  register(name: string, hook: ScrapeHook): void {
    this.hooks.set(name, hook);
  }

  async runAll(timeoutMs: number): Promise<string[]> {
    const failed: string[] = [];
    await Promise.all(
      [...this.hooks].map(async ([name, hook]) => {
        let timer: NodeJS.Timeout | undefined;
        try {
          await Promise.race([
            hook(),
            new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error('timeout')), timeoutMs))),
          ]);
        } catch {
          failed.push(name);
        } finally {
          clearTimeout(timer);
        }
      }),
    );
    return failed;
  }
}
