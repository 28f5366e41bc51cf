// Types of deploy/process-settings.js (plain JavaScript, because ecosystem.config.js loads it inside pm2, where a
// .ts import would load Node's TypeScript stripper into the supervisor).
export interface NodeProcessSettings {
  /** V8 flags, before the main on Node's command line. */
  v8: string[];
  /** Added to the process's environment. */
  env: Record<string, string>;
}
export declare const NODE_PROCESSES: Record<'router' | 'coordination' | 'console' | 'relay', NodeProcessSettings>;
