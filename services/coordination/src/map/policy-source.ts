// Where the policy text in force comes from:
//   - Redis (the default): the current version in the policy store, replaced when a save anywhere (console, CLI, API,
//     another instance) publishes policy.change. Saves are validated before they are stored (admin API), so what is
//     stored compiled when it was saved.
//   - HSE_POLICY_FILE: the file. It is read at start and whenever it changes on disk (polled every second: works for
//     editors that replace the file and for bind mounts); a version that does not compile is refused — logged with
//     its line and column, written to the activity log — and the previous policy stays in force.
// The text is handed to LivePolicy (live-policy.ts), which compiles it against the tailnet.
import { EventEmitter } from 'node:events';
import fs from 'node:fs';
import type { Logger } from '../../../../shared/log.ts';
import type { PolicyStore, PolicyVersion } from '../state/policy-store.ts';

export interface PolicyText {
  /** null = no policy: allow-all. */
  text: string | null;
  /** Store version, or null for a file / no policy. */
  version: number | null;
  /** Where it came from, for logs and the console: "version 7", "file /etc/hse/policy.hujson", "none". */
  origin: string;
}

export interface PolicySourceEvents {
  /** A new text to try; `accept` says whether it compiled (LivePolicy answers). */
  text: [text: PolicyText];
}

const POLL_MS = 1000;

export class PolicySource extends EventEmitter<PolicySourceEvents> {
  readonly file: string | null;
  private readonly store: PolicyStore;
  private readonly log: Logger;
  private lastFileText: string | null = null;
  private lastVersion = -1;
  private watching = false;

  constructor(opts: { store: PolicyStore; file: string | null; log: Logger }) {
    super();
    this.store = opts.store;
    this.file = opts.file;
    this.log = opts.log;
  }

  /** The text in force at start. */
  async initial(): Promise<PolicyText> {
    if (this.file) {
      const text = this.readFile();
      this.lastFileText = text;
      return { text, version: null, origin: `file ${this.file}` };
    }
    const cur = await this.store.current();
    this.lastVersion = cur?.version ?? 0;
    return fromVersion(cur);
  }

  /** Starts watching the file (file mode); in store mode `onStoreChange` is called by the change channel. */
  watch(): void {
    if (!this.file || this.watching) return;
    this.watching = true;
    fs.watchFile(this.file, { interval: POLL_MS, persistent: false }, () => this.reloadFile());
  }

  stop(): void {
    if (this.file && this.watching) fs.unwatchFile(this.file);
    this.watching = false;
  }

  /** A policy.change event arrived (store mode): load that version if it is newer than the one we have. */
  async onStoreChange(): Promise<void> {
    if (this.file) return;
    const cur = await this.store.current();
    const v = cur?.version ?? 0;
    if (v === this.lastVersion) return;
    this.lastVersion = v;
    this.emit('text', fromVersion(cur));
  }

  private readFile(): string | null {
    try {
      return fs.readFileSync(this.file as string, 'utf8');
    } catch (e) {
      const err = e as NodeJS.ErrnoException;
      // A missing file at start is no policy (allow-all), said loudly; later it keeps the policy in force.
      this.log.warn('cannot read the policy file', { file: this.file, error: err.code ?? err.message });
      return null;
    }
  }

  private reloadFile(): void {
    let text: string;
    try {
      text = fs.readFileSync(this.file as string, 'utf8');
    } catch (e) {
      this.log.warn('cannot read the policy file; the policy in force stays', { file: this.file, error: (e as NodeJS.ErrnoException).code });
      return;
    }
    if (text === this.lastFileText) return;
    this.lastFileText = text;
    this.emit('text', { text, version: null, origin: `file ${this.file}` });
  }
}

function fromVersion(v: PolicyVersion | null): PolicyText {
  return v ? { text: v.text, version: v.version, origin: `version ${v.version}` } : { text: null, version: null, origin: 'none' };
}
