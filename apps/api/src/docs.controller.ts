import { Controller, Get, Header, NotFoundException, Param, Res } from '@nestjs/common';
import { buildOpenApi } from '@tollgate/platform';
import type { FastifyReply } from 'fastify';
import { readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';

// swagger-ui-dist ships the UI as static files (resolved, not required: its index loads the whole bundle); served from here so /docs works offline.
const uiRoot: string = dirname(require.resolve('swagger-ui-dist/package.json'));
// A Map, not an object: the file name comes from the URL, and `toString` is not a file.
const ASSETS = new Map([
  ['swagger-ui.css', 'text/css; charset=utf-8'],
  ['swagger-ui-bundle.js', 'application/javascript; charset=utf-8'],
  ['swagger-ui-standalone-preset.js', 'application/javascript; charset=utf-8'],
]);

const PAGE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Tollgate API</title>
<link rel="stylesheet" href="/docs/assets/swagger-ui.css"></head>
<body><div id="ui"></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script>window.ui = SwaggerUIBundle({ url: '/docs/json', dom_id: '#ui' });</script>
</body></html>`;

@Controller('docs')
export class DocsController {
  private document?: Record<string, unknown>;

  @Get()
  @Header('content-type', 'text/html; charset=utf-8')
  page() {
    return PAGE;
  }

  /** The OpenAPI document, generated from the zod schemas that validate the requests. */
  @Get('json')
  json() {
    this.document ??= buildOpenApi({ title: 'Tollgate', version: '0.1.0' });
    return this.document;
  }

  @Get('assets/:file')
  async asset(@Param('file') file: string, @Res() reply: FastifyReply) {
    const type = ASSETS.get(file);
    if (!type) throw new NotFoundException();
    const body = await readFile(join(uiRoot, file));
    void reply.header('content-type', type).header('cache-control', 'public, max-age=86400').send(body);
  }
}
