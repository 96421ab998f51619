// A refusal at the simulator's boundary: a part-7 code and a message (never a secret or password).
import { codeMeaning } from '../../platform/codes.ts';
import { RotorError } from '../../errors/rotor-error.ts';

/** The sandbox refusing a call with one of the seed's codes (`platformCode`), as a platform would. */
export class SimError extends RotorError {
  declare readonly platformCode: number;
  constructor(code: number, detail?: string) {
    super('SIM_REFUSED', detail ? `${codeMeaning(code)}: ${detail}` : codeMeaning(code), { httpStatus: 502, platformCode: code });
  }
}
