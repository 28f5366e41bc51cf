// Structured, operator-readable log lines: `<ISO time> <LEVEL> <process>: <message> key=value ...`.
// One line per event, values quoted only when they need it, so `grep` and `awk` work and a person can read it at 3 a.m.
import type { LogLevel } from './config.ts';

const ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export type Fields = Record<string, unknown>;

function formatValue(v: unknown): string {
  if (v instanceof Error) v = v.message;
  if (typeof v === 'object' && v !== null) v = JSON.stringify(v);
  const s = String(v);
  return s === '' || /[\s"=]/.test(s) ? JSON.stringify(s) : s;
}

export function formatFields(fields: Fields | undefined): string {
  if (!fields) return '';
  let out = '';
  for (const [k, v] of Object.entries(fields)) {
    if (v === undefined) continue;
    out += ` ${k}=${formatValue(v)}`;
  }
  return out;
}

export class Logger {
  readonly name: string;
  level: LogLevel;
  constructor(name: string, level: LogLevel = 'info') {
    this.name = name;
    this.level = level;
  }
  child(suffix: string): Logger {
    return new Logger(`${this.name}/${suffix}`, this.level);
  }
  private write(level: LogLevel, msg: string, fields?: Fields): void {
    if (ORDER[level] < ORDER[this.level]) return;
    const line = `${new Date().toISOString()} ${level.toUpperCase().padEnd(5)} ${this.name}: ${msg}${formatFields(fields)}\n`;
    (level === 'error' || level === 'warn' ? process.stderr : process.stdout).write(line);
  }
  debug(msg: string, fields?: Fields): void {
    this.write('debug', msg, fields);
  }
  info(msg: string, fields?: Fields): void {
    this.write('info', msg, fields);
  }
  warn(msg: string, fields?: Fields): void {
    this.write('warn', msg, fields);
  }
  error(msg: string, fields?: Fields): void {
    this.write('error', msg, fields);
  }
}

/** Shows a secret by its first characters only, so logs can correlate keys without leaking them. */
export function redact(secret: string, keep = 12): string {
  return secret.length <= keep ? secret : `${secret.slice(0, keep)}…`;
}
