// Debian's nginx for a benchmark: its own prefix and config in a temp dir, in the foreground, no access log (the
// router writes none per request either), workers as root so they can reach a Unix socket in hse's private run dir.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { descendantsOf } from '../../test/harness/proc.ts';
import { HEAD_AND_TAIL, startProcess, type Proc } from '../../test/harness/process.ts';

export interface Nginx {
  server: Proc;
  /** Master and workers. */
  pids(): Record<string, number>;
  stop(): Promise<void>;
}

/** `http` is the body of the http {} block. */
export async function startNginx(name: string, opts: { workers: number | 'auto'; http: string; workerConnections?: number }): Promise<Nginx> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `nginx-bench-${name}-`));
  const conf = path.join(dir, 'nginx.conf');
  fs.writeFileSync(
    conf,
    `# Written by bench/lib/nginx.ts for one benchmark run.
user root;
worker_processes ${opts.workers};
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections ${opts.workerConnections ?? 4096}; }
http {
  access_log off;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  keepalive_requests 1000000;
${opts.http}
}
`,
  );
  const server = startProcess(`nginx-${name}`, 'nginx', ['-p', dir, '-c', conf, '-g', 'daemon off;'], { keep: HEAD_AND_TAIL });
  // nginx prints nothing when it starts well; wait for the pid file and the workers.
  const deadline = Date.now() + 15_000;
  while (Date.now() < deadline && (!fs.existsSync(path.join(dir, 'nginx.pid')) || descendantsOf(server.pid).length === 0)) {
    if (server.proc.exitCode !== null) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  if (server.proc.exitCode !== null || !fs.existsSync(path.join(dir, 'nginx.pid'))) {
    const err = fs.existsSync(path.join(dir, 'error.log')) ? fs.readFileSync(path.join(dir, 'error.log'), 'utf8') : '';
    await server.stop();
    throw new Error(`nginx (${name}) did not start: ${server.output()} ${err}`);
  }
  return {
    server,
    pids() {
      const out: Record<string, number> = { [`nginx-${name} master`]: server.pid };
      for (const [i, p] of descendantsOf(server.pid).entries()) out[`nginx-${name} worker ${i + 1}`] = p;
      return out;
    },
    async stop() {
      await server.stop('SIGTERM'); // fast shutdown: SIGQUIT would wait for held long-polls
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
