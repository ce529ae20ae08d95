export { ExportersModule, ExportersHttpModule } from './exporters.module';
export { ExportPipeline } from './delivery/export-pipeline';
export { EXPORT_BACKOFF } from './delivery/export-jobs';
export { backoffMs, SinkError } from './delivery/sink-error';
export { ExportersService } from './config/exporters.service';
export { putExporterSchema, replaySchema } from './exporter/exporter-settings';
export { verifyWebhook } from './wire/webhook';
