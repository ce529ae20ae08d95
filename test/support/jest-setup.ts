// Integration and end-to-end specs talk to real PostgreSQL, Redis and HTTP: give them room.
jest.setTimeout(30_000);
