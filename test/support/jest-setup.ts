import { checkRecordedAnswers } from './contract';

// Integration and end-to-end specs talk to real PostgreSQL, Redis and HTTP: give them room.
jest.setTimeout(30_000);

// What the service answered in this spec file, against its OpenAPI document (test/support/contract.ts).
afterAll(() => checkRecordedAnswers());
