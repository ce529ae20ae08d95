/** Headers that frame the request or route it: the sender sets them, never an exporter's configuration. */
const RESERVED_HEADERS = new Set([
  'host',
  'content-length',
  'transfer-encoding',
  'connection',
  'keep-alive',
  'upgrade',
  'te',
  'trailer',
  'expect',
  'proxy-authorization',
  'proxy-connection',
]);

export const isReservedHeader = (name: string) => RESERVED_HEADERS.has(name.toLowerCase());
