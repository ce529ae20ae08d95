/** A one-line progress bar on stderr: done/total, rate and time left (plain lines when not a TTY). */
export class ProgressBar {
  private readonly started = Date.now();
  private lastPlain = 0;

  constructor(
    private readonly label: string,
    private readonly stream: NodeJS.WriteStream = process.stderr,
  ) {}

  update(done: number, total: number, final = false): void {
    const elapsed = (Date.now() - this.started) / 1000;
    const rate = elapsed > 0 ? done / elapsed : 0;
    const left = Math.max(total - done, 0);
    const eta = rate > 0 ? left / rate : Number.POSITIVE_INFINITY;
    const ratio = total > 0 ? Math.min(done / total, 1) : 1;
    const width = 30;
    const bar = '#'.repeat(Math.round(ratio * width)).padEnd(width, '.');
    const line = `${this.label} [${bar}] ${done.toLocaleString('en-US')}/${total.toLocaleString('en-US')} events  ${Math.round(rate).toLocaleString('en-US')}/s  ${final ? `done in ${formatSeconds(elapsed)}` : `ETA ${formatSeconds(eta)}`}`;
    if (this.stream.isTTY) {
      this.stream.write(`\r${line.padEnd(100)}${final ? '\n' : ''}`);
    } else if (final || Date.now() - this.lastPlain > 2000) {
      this.lastPlain = Date.now();
      this.stream.write(`${line}\n`);
    }
  }
}

export function formatSeconds(s: number): string {
  if (!Number.isFinite(s)) return '--:--';
  const m = Math.floor(s / 60);
  const sec = Math.floor(s % 60);
  return m >= 60 ? `${Math.floor(m / 60)}h${String(m % 60).padStart(2, '0')}m` : `${m}:${String(sec).padStart(2, '0')}`;
}
