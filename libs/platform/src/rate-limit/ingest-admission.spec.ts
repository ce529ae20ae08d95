import { IngestAdmission } from './ingest-admission';

describe('IngestAdmission', () => {
  const MiB = 1024 * 1024;

  it('takes bodies up to the in-flight bound, refuses the next, and takes again once one is released', () => {
    const admission = new IngestAdmission(4 * MiB, 10, { waitingCount: 0 });
    expect(Array.from({ length: 5 }, () => admission.admit(MiB))).toEqual([null, null, null, null, 'bytes']);
    expect(admission.bytesInFlight).toBe(4 * MiB);
    admission.release(MiB);
    expect(admission.admit(MiB)).toBeNull();
    expect(admission.admit(1)).toBe('bytes');
  });

  it('always takes one body, however large (INGEST_MAX_BODY_BYTES bounds a body, not this)', () => {
    const admission = new IngestAdmission(MiB, 10, { waitingCount: 0 });
    expect(admission.admit(4 * MiB)).toBeNull();
    expect(admission.admit(1)).toBe('bytes');
  });

  it('refuses while the pool has more than the bound waiting, and a refusal takes nothing in flight', () => {
    const pool = { waitingCount: 10 };
    const admission = new IngestAdmission(4 * MiB, 10, pool);
    expect([admission.poolBacklogged(), admission.admit(1)]).toEqual([false, null]);
    pool.waitingCount = 11;
    expect([admission.poolBacklogged(), admission.admit(1)]).toEqual([true, 'pool']);
    expect(admission.bytesInFlight).toBe(1);
  });
});
