import { Controller, Get, Header, NotFoundException, Param, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { existsSync, readdirSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { dirname, extname, join, resolve } from 'node:path';

/**
 * The dashboard's static files live in `apps/api/dashboard/` (plain HTML/CSS/ES modules, no build
 * step). tsc does not copy them to `dist/`, so they are found from this file's directory whether it
 * runs from source (jest) or compiled (`dist/apps/api/src`), or else from the working directory.
 */
function findAssetRoot(): string {
  const candidates = [
    resolve(__dirname, '../dashboard'),
    resolve(__dirname, '../../../../apps/api/dashboard'),
    resolve(process.cwd(), 'apps/api/dashboard'),
  ];
  const found = candidates.find((dir) => existsSync(join(dir, 'index.html')));
  if (!found) throw new Error(`dashboard assets not found (looked in ${candidates.join(', ')})`);
  return found;
}

// Maps, not objects: the file name comes from the URL, and `__proto__` or `toString` is not a file.
const TYPES = new Map([
  ['.js', 'application/javascript; charset=utf-8'],
  ['.css', 'text/css; charset=utf-8'],
  ['.svg', 'image/svg+xml'],
]);

// uPlot (MIT, ~50 kB minified) draws the charts; served from node_modules so the dashboard works offline.
const uplotDist = join(dirname(require.resolve('uplot/package.json')), 'dist');
const VENDOR = new Map([
  ['uPlot.iife.min.js', TYPES.get('.js')!],
  ['uPlot.min.css', TYPES.get('.css')!],
]);

@Controller('dashboard')
export class DashboardController {
  private readonly root = findAssetRoot();
  // Only the files that exist at boot are served: no path from the request reaches the file system.
  private readonly assets = new Set(readdirSync(this.root).filter((f) => TYPES.has(extname(f))));

  @Get()
  @Header('content-type', 'text/html; charset=utf-8')
  @Header('cache-control', 'no-cache')
  page() {
    return readFile(join(this.root, 'index.html'), 'utf8');
  }

  @Get('assets/:file')
  async asset(@Param('file') file: string, @Res() reply: FastifyReply) {
    if (!this.assets.has(file)) throw new NotFoundException();
    const body = await readFile(join(this.root, file));
    void reply
      .header('content-type', TYPES.get(extname(file))!)
      .header('cache-control', 'no-cache')
      .send(body);
  }

  @Get('vendor/:file')
  async vendor(@Param('file') file: string, @Res() reply: FastifyReply) {
    const type = VENDOR.get(file);
    if (!type) throw new NotFoundException();
    const body = await readFile(join(uplotDist, file));
    void reply.header('content-type', type).header('cache-control', 'public, max-age=86400').send(body);
  }
}
