import type { Checkpoint } from '@tollgate/database';
import type { ExporterSettings } from './exporter-settings';
import { DEFAULT_EVENT_TYPES } from './exporter-settings';

/** An exporter as stored (secrets still sealed). */
export interface ExporterRecord {
  id: string;
  projectId: string;
  name: string;
  type: 'webhook' | 'otlp' | 'slack';
  settings: ExporterSettings;
  sealedSecrets: string | null;
  status: 'active' | 'paused';
  pausedReason: string | null;
  consecutiveFailures: number;
  checkpoint: Checkpoint;
  inFlightBatch: string | null;
  lastDeliveredAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
}

export function recordOf(r: {
  id: string;
  projectId: string;
  name: string;
  type: string;
  settings: unknown;
  secrets: string | null;
  status: string;
  pausedReason: string | null;
  consecutiveFailures: number;
  checkpointTx: string;
  checkpointPosition: bigint;
  inFlightBatch: string | null;
  lastDeliveredAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
}): ExporterRecord {
  return {
    id: r.id,
    projectId: r.projectId,
    name: r.name,
    type: r.type as ExporterRecord['type'],
    settings: r.settings as ExporterSettings,
    sealedSecrets: r.secrets,
    status: r.status as ExporterRecord['status'],
    pausedReason: r.pausedReason,
    consecutiveFailures: r.consecutiveFailures,
    checkpoint: { tx: r.checkpointTx, position: r.checkpointPosition },
    inFlightBatch: r.inFlightBatch,
    lastDeliveredAt: r.lastDeliveredAt,
    createdAt: r.createdAt,
    updatedAt: r.updatedAt,
  };
}

/** The event types an exporter sends: OTLP spans exist for step events only; Slack gets the alerts it names. */
export function typesOf(e: Pick<ExporterRecord, 'settings'>): readonly string[] {
  return e.settings.type === 'otlp' ? DEFAULT_EVENT_TYPES : e.settings.eventTypes;
}
