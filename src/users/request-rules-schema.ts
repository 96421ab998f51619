// The zod schema of request rules (`proxy.requestRules` and a user's `requestRules`), shared by the config
// and the admin API so both accept and refuse the same input. The rules are enforced by the gateway
// (src/proxy/request-rules.ts); this file only says what a rule may hold.
import { z } from 'zod';
import { BODY_BYTES_DEFAULT, BODY_BYTES_MAX, BODY_PATTERN_MAX_LENGTH, bodyPatternProblem } from '../proxy/request-rules-pattern.ts';

/** `example.com`, `*.example.com` (strict subdomains), `.example.com` (the name and below), or an IP literal. */
const hostPattern = z
  .string()
  .min(1)
  .max(255)
  .regex(/^(\*\.|\.)?[A-Za-z0-9_.:-]+$/, "expected a host name, '*.name', '.name' or an IP address");

const METHOD = /^[A-Z]{1,16}$/;

export const requestRuleSchema = z
  .strictObject({
    /** Shown in the connection record and the bans; default `proxy#<n>` / `user#<n>`. */
    name: z
      .string()
      .regex(/^[A-Za-z0-9_.:-]{1,64}$/)
      .optional(),
    /** Target hosts the rule applies to; empty or absent = every host. */
    hosts: z.array(hostPattern).max(1_000).optional(),
    /** Response statuses that fire it (plain HTTP); on a tunnel, a failed dial counts as 502 (504 when it timed out). */
    status: z.array(z.number().int().min(100).max(599)).max(100).optional(),
    /** Fires when the first response byte has not come after this many ms (plain HTTP: the head; tunnels: the first byte). */
    timeoutMs: z.number().int().min(1).max(600_000).optional(),
    /** Plain HTTP: response headers that must match too (name → substring, case-insensitive). */
    headers: z
      .object({})
      .catchall(z.string().max(256))
      .refine((h) => Object.keys(h).length <= 16 && Object.keys(h).every((k) => /^[A-Za-z0-9-]{1,64}$/.test(k)), {
        message: 'at most 16 header names of [A-Za-z0-9-]',
      })
      .optional(),
    /**
     * Plain HTTP: a regular expression (case-insensitive, bounded: src/proxy/request-rules-pattern.ts) that must
     * match within the response body's first bodyBytes (with status and headers when given).
     */
    body: z.string().min(1).max(BODY_PATTERN_MAX_LENGTH).optional(),
    /** How much of the body a body pattern sees (held before any byte goes to the client). Default 8 KiB. */
    bodyBytes: z.number().int().min(1).max(BODY_BYTES_MAX).default(BODY_BYTES_DEFAULT),
    /**
     * When matching the body takes longer than the deadline (src/proxy/request-rules-matcher.ts, 100 ms) and is
     * stopped on this rule's pattern: `pass` (default) counts it as not matched, `fire` fires the rule.
     */
    bodyTimeout: z.enum(['pass', 'fire']).optional(),
    action: z.enum(['retry', 'ban', 'retry_ban', 'tag']),
    /** Further exits tried (retry, retry_ban). Default 1. */
    retries: z.number().int().min(0).max(5).default(1),
    /** How long an exit stays banned for the user (ban, retry_ban). Default 600. */
    banSeconds: z
      .number()
      .int()
      .min(1)
      .max(30 * 86_400)
      .default(600),
    /** Ban the exit for this target host only, not for every host. Default false. */
    banHost: z.boolean().default(false),
    /** Methods retried; default the idempotent ones (GET, HEAD, OPTIONS, PUT, DELETE, TRACE). */
    methods: z.array(z.string().regex(METHOD)).max(16).optional(),
  })
  .refine((r) => r.status !== undefined || r.timeoutMs !== undefined || r.body !== undefined, {
    message: 'a rule needs status codes, timeoutMs or a body pattern',
  })
  .superRefine((r, ctx) => {
    if (r.body === undefined) return;
    const problem = bodyPatternProblem(r.body, r.bodyBytes);
    if (problem !== undefined) ctx.addIssue({ code: 'custom', path: ['body'], message: `body pattern refused: ${problem}` });
  });

export const requestRulesSchema = z.array(requestRuleSchema).max(100);

export type RequestRuleInput = z.input<typeof requestRuleSchema>;
export type RequestRuleConfig = z.output<typeof requestRuleSchema>;
