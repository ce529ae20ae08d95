/**
 * bench:http-adapter — why the API runs on Fastify: the same Nest controller (JSON body of 100
 * step events in, a small JSON answer out) on Express and on Fastify, measured in one run.
 */
import 'reflect-metadata';
import { Body, Controller, HttpCode, Module, Post } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ExpressAdapter, type NestExpressApplication } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { median } from '../support/harness';

@Controller()
class EchoController {
  @Post('events')
  @HttpCode(200)
  ingest(@Body() body: { events: unknown[] }) {
    return { accepted: body.events.length, results: body.events.map((_, index) => ({ index, status: 'accepted' })) };
  }
}

@Module({ controllers: [EchoController] })
class EchoModule {}

const body = JSON.stringify({
  events: Array.from({ length: 100 }, (_, i) => ({
    eventId: `e-${i}`,
    occurredAt: new Date().toISOString(),
    traceId: `t-${i}`,
    resourceId: 'r',
    entityType: 'agent',
    provider: 'openai',
    model: 'gpt-4o',
    usage: { inputTokens: 1000 + i, outputTokens: 200 },
  })),
});

async function rate(url: string, requests: number, concurrency: number): Promise<number> {
  let sent = 0;
  const started = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (sent < requests) {
        sent++;
        const res = await fetch(`${url}/events`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body,
        });
        await res.arrayBuffer();
      }
    }),
  );
  return requests / (Number(process.hrtime.bigint() - started) / 1e9);
}

async function main() {
  const express = await NestFactory.create<NestExpressApplication>(EchoModule, new ExpressAdapter(), {
    logger: false,
    bodyParser: true,
  });
  express.useBodyParser('json', { limit: '1mb' });
  await express.listen(0, '127.0.0.1');
  const fastify = await NestFactory.create(EchoModule, new FastifyAdapter({ bodyLimit: 1024 * 1024 }), {
    logger: false,
  });
  await fastify.listen(0, '127.0.0.1');
  const urlOf = (app: { getHttpServer(): { address(): unknown } }) =>
    `http://127.0.0.1:${(app.getHttpServer().address() as { port: number }).port}`;
  const e: number[] = [];
  const f: number[] = [];
  await rate(urlOf(express), 500, 8);
  await rate(urlOf(fastify), 500, 8);
  for (let round = 0; round < 5; round++) {
    e.push(await rate(urlOf(express), 3000, 8));
    f.push(await rate(urlOf(fastify), 3000, 8));
  }
  console.log(`Express  median ${median(e).toFixed(0)} requests/s (100-event JSON bodies, concurrency 8)`);
  console.log(`Fastify  median ${median(f).toFixed(0)} requests/s`);
  console.log(`ratio fastify/express ${(median(f) / median(e)).toFixed(2)}`);
  await express.close();
  await fastify.close();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
