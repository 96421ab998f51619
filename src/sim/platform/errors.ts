// A refusal at the simulator's boundary: a part-7 code and a message (never a secret or password).
import { codeMeaning } from '../../platform/codes.ts';

export class SimError extends Error {
  readonly code: number;
  constructor(code: number, detail?: string) {
    super(detail ? `${codeMeaning(code)}: ${detail}` : codeMeaning(code));
    this.name = 'SimError';
    this.code = code;
  }
}
