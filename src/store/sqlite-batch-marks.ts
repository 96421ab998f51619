// The writers' marks of src/store/batch-marks.ts in the SQLite file (table batch_writers, migration 72).
import type Database from 'better-sqlite3';
import { BATCH_WRITER_TTL_MS, parseBatchId } from './batch-marks.ts';

/** The SQLite marks (table batch_writers, migration 72) of one kind of batch ('usage', 'connlog'). */
export class SqliteBatchMarks {
  private readonly read: Database.Statement;
  private readonly write: Database.Statement;
  private readonly trim: Database.Statement;

  constructor(
    db: Database.Database,
    private readonly kind: string,
  ) {
    this.read = db.prepare('SELECT seq FROM batch_writers WHERE kind = ? AND writer = ?').pluck();
    this.write = db.prepare(
      `INSERT INTO batch_writers (kind, writer, seq, at) VALUES (?, ?, ?, ?)
       ON CONFLICT (kind, writer) DO UPDATE SET seq = excluded.seq, at = excluded.at`,
    );
    this.trim = db.prepare('DELETE FROM batch_writers WHERE at < ?');
  }

  /**
   * Inside the batch's transaction: true when the batch was taken before (nothing to do); else its mark is
   * written (with the increments, or rolled back with them) and the marks of writers silent for
   * BATCH_WRITER_TTL_MS go.
   */
  taken(id: string, now: number): boolean {
    const { writer, seq } = parseBatchId(id);
    const mark = this.read.get(this.kind, writer) as number | undefined;
    if (mark !== undefined && seq <= mark) return true;
    this.write.run(this.kind, writer, seq, now);
    this.trim.run(now - BATCH_WRITER_TTL_MS);
    return false;
  }
}
