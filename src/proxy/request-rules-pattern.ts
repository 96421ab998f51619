// A request rule's body pattern (`body`): a JavaScript regular expression matched, case-insensitively, against
// the first `bodyBytes` of a plain-HTTP response. V8's engine backtracks, so a careless pattern on 64 KiB of a
// hostile page could hold the event loop for seconds (`.*x` on 64 KiB of "a": 11 s measured). Patterns are
// therefore checked when the config or the admin API takes them, and only a subset whose matching cost is
// bounded is accepted:
//   - no unbounded repetition (`*`, `+`, `{n,}`): write a bound, `.{0,64}`; bounds at most 1,000;
//   - no backreference and no lookaround;
//   - classes read as JavaScript reads them without the `u`/`v` flag (none is taken): the first unescaped ']'
//     ends one, so `[]` (nothing) and `[^]` (any character) are whole classes; the engine is asked to confirm
//     each class and the count of capturing groups, and a pattern it reads otherwise is refused;
//   - the ways the pattern can match at one place (alternatives add, repetitions multiply) times bodyBytes
//     stays within a fixed budget, so the worst match costs a few million steps whatever the page.

import { RotorError } from '../errors/rotor-error.ts';

/** Longest pattern accepted. */
export const BODY_PATTERN_MAX_LENGTH = 512;
/** Ways to match at one place × bodyBytes: 2^23 (1,024 ways at the default 8 KiB, 128 at 64 KiB). */
export const BODY_PATTERN_BUDGET = 8 * 1024 * 1024;
/** The longest repetition bound. */
const MAX_BOUND = 1000;
const CAP = 1e12;

export const BODY_BYTES_DEFAULT = 8 * 1024;
export const BODY_BYTES_MAX = 64 * 1024;

/** What the reader found wrong (caught below and turned into the schema's message). */
class PatternProblem extends RotorError {
  constructor(message: string) {
    super('BODY_PATTERN_REFUSED', message, { httpStatus: 400 });
  }
}

/** Walks the pattern's source once, computing its cost (ways to match at one place); throws PatternProblem. */
class CostReader {
  private i = 0;
  /** Capturing groups read (plain and named), checked against the engine's own count. */
  groups = 0;

  constructor(private readonly src: string) {}

  /**
   * The engine must read `span` as one whole class too: it compiles alone, and without its last ']' it is an
   * unterminated class. Anything the reader would take for a class while the engine reads pattern is refused.
   */
  private checkClass(span: string): void {
    let whole = false;
    let cut = false;
    try {
      new RegExp(span, 'i');
      whole = true;
      new RegExp(span.slice(0, -1), 'i');
    } catch {
      cut = whole;
    }
    if (!whole || !cut) throw new PatternProblem(`a character class not read as one at ${this.i - span.length}`);
  }

  read(): number {
    const cost = this.alternatives();
    if (this.i < this.src.length) throw new PatternProblem(`unbalanced ')' at ${this.i}`);
    return cost;
  }

  private alternatives(): number {
    let cost = this.sequence();
    while (this.src[this.i] === '|') {
      this.i++;
      cost = Math.min(CAP, cost + this.sequence());
    }
    return cost;
  }

  private sequence(): number {
    let cost = 1;
    while (this.i < this.src.length && this.src[this.i] !== '|' && this.src[this.i] !== ')') {
      const atom = this.atom();
      cost = Math.min(CAP, cost * this.quantified(atom));
    }
    return cost;
  }

  private atom(): number {
    const c = this.src[this.i]!;
    if (c === '(') {
      this.i++;
      const capturing = this.src[this.i] !== '?' || this.src.startsWith('?<', this.i);
      if (this.src.startsWith('?:', this.i)) this.i += 2;
      else if (this.src.startsWith('?<', this.i) && this.src[this.i + 2] !== '=' && this.src[this.i + 2] !== '!') {
        const close = this.src.indexOf('>', this.i);
        if (close < 0) throw new PatternProblem('unterminated group name');
        this.i = close + 1;
      } else if (this.src[this.i] === '?')
        throw new PatternProblem("lookarounds ((?=, (?!, (?<=, (?<!) and other '(?' groups are not accepted");
      if (capturing) this.groups++;
      const inner = this.alternatives();
      if (this.src[this.i] !== ')') throw new PatternProblem("missing ')'");
      this.i++;
      return inner;
    }
    if (c === '[') {
      // JavaScript (no `u`/`v` flag) ends a class at its first unescaped ']', also right after '[' or '[^':
      // `[]` matches nothing and `[^]` any character; '[' inside a class is a plain member (no nesting).
      const start = this.i;
      this.i++;
      while (this.i < this.src.length && this.src[this.i] !== ']') this.i += this.src[this.i] === '\\' ? 2 : 1;
      if (this.i >= this.src.length) throw new PatternProblem("missing ']'");
      this.i++;
      this.checkClass(this.src.slice(start, this.i));
      return 1;
    }
    if (c === '\\') {
      const next = this.src[this.i + 1];
      if (next === undefined) throw new PatternProblem('a trailing backslash');
      if ((next >= '1' && next <= '9') || next === 'k') throw new PatternProblem('backreferences are not accepted');
      this.i += 2;
      return 1;
    }
    if (c === '*' || c === '+' || c === '?' || c === '{') {
      // A quantifier with nothing before it ('{' alone is a literal in JavaScript; treated as an error here too).
      throw new PatternProblem(`nothing to repeat at ${this.i}`);
    }
    this.i++;
    return 1;
  }

  /** The atom's cost under the quantifier that follows it, if any. */
  private quantified(atom: number): number {
    const c = this.src[this.i];
    let max: number;
    if (c === '*' || c === '+') throw new PatternProblem(`unbounded repetition '${c}' at ${this.i}: write a bound such as {0,64}`);
    if (c === '?') {
      this.i++;
      max = 1;
    } else if (c === '{') {
      const m = /^\{(\d{1,6})(,(\d{0,6}))?\}/.exec(this.src.slice(this.i));
      if (!m) throw new PatternProblem(`a malformed {m,n} at ${this.i}`);
      if (m[2] !== undefined && m[3] === '') throw new PatternProblem(`unbounded repetition '${m[0]}' at ${this.i}: write an upper bound`);
      max = Number(m[3] ?? m[1]);
      if (max > MAX_BOUND) throw new PatternProblem(`repetition bound ${max} over ${MAX_BOUND}`);
      this.i += m[0].length;
    } else return atom;
    if (this.src[this.i] === '?') this.i++; // lazy: the same ways
    // 1 + atom + atom^2 + … + atom^max ways.
    if (atom === 1) return max + 1;
    let ways = 1;
    let power = 1;
    for (let k = 1; k <= max && ways < CAP; k++) {
      power = Math.min(CAP, power * atom);
      ways = Math.min(CAP, ways + power);
    }
    return ways;
  }
}

/** What is wrong with a body pattern matched over `bodyBytes` bytes, or undefined when it is accepted. */
export function bodyPatternProblem(source: string, bodyBytes: number): string | undefined {
  if (source.length === 0) return 'empty pattern';
  if (source.length > BODY_PATTERN_MAX_LENGTH) return `longer than ${BODY_PATTERN_MAX_LENGTH} characters`;
  try {
    new RegExp(source, 'i');
  } catch (err) {
    return `not a valid regular expression (${(err as Error).message})`;
  }
  let cost: number;
  const reader = new CostReader(source);
  try {
    cost = reader.read();
  } catch (err) {
    if (err instanceof PatternProblem) return err.message;
    throw err;
  }
  // A second reading by the engine itself: the capturing groups it counts (an empty alternative added so
  // that the match cannot fail) must be the ones the reader costed; a group hidden from the reader is refused.
  const engineGroups = new RegExp(`${source}|`, 'i').exec('')!.length - 1;
  if (engineGroups !== reader.groups) return 'a pattern the cost reader cannot read as the engine does';
  if (cost * bodyBytes > BODY_PATTERN_BUDGET) {
    const most = Math.floor(BODY_PATTERN_BUDGET / bodyBytes);
    return `too costly: ${cost >= CAP ? 'too many' : cost} ways to match at one place, at most ${most} over ${bodyBytes} body bytes`;
  }
  return undefined;
}

/** The compiled pattern (case-insensitive); call only with a pattern bodyPatternProblem accepted. */
export function compileBodyPattern(source: string): RegExp {
  return new RegExp(source, 'i');
}
