// The opaque paging cursor of GET /v1/connections: the last item's (startedAt, id), base64url. Paging by
// position, not offset, so records written while a client pages never shift or repeat items.
export interface Cursor {
  startedAt: number;
  id: string;
}

export function encodeCursor(c: Cursor): string {
  return Buffer.from(`${c.startedAt}:${c.id}`, 'utf8').toString('base64url');
}

/** undefined when the text is not a cursor this daemon wrote. */
export function decodeCursor(text: string): Cursor | undefined {
  if (!/^[A-Za-z0-9_-]{1,200}$/.test(text)) return undefined;
  const plain = Buffer.from(text, 'base64url').toString('utf8');
  const m = /^(\d{1,16}):([A-Za-z0-9_-]{1,64})$/.exec(plain);
  if (!m) return undefined;
  return { startedAt: Number(m[1]), id: m[2]! };
}
