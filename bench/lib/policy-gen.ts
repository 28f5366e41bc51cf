// A generated tailnet and policy at the scale of issue 17's benchmark: 100 groups, ~300 rules, tags, subnet routers,
// SSH rules, tests; each user's device reaches about 50 others. Deterministic for a seed.
import type { TailnetSnapshot } from '../../services/coordination/src/policy/index.ts';

function rng(s: number) {
  let a = s >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function v4(k: number): string {
  const n = 0x64400000 + k + 1; // 100.64.0.0 + k + 1
  return `${n >>> 24}.${(n >>> 16) & 255}.${(n >>> 8) & 255}.${n & 255}`;
}

export interface Generated {
  snapshot: TailnetSnapshot;
  policy: Record<string, unknown>;
}

/** A tailnet of n nodes (70% users' devices, 30% tagged servers, some subnet routers) and a policy for it. */
export function generate(n: number, s: number): Generated {
  const rand = rng(s);
  const pick = <T>(a: readonly T[]) => a[Math.floor(rand() * a.length)];
  const tagged = Math.round(n * 0.3);
  const userDevices = n - tagged;
  const userCount = Math.max(1, Math.ceil(userDevices / 2));
  const tagCount = Math.max(20, Math.round(tagged / 15));
  const groupCount = 100;
  const users = Array.from({ length: userCount }, (_, i) => ({
    id: i + 1,
    name: `u${i}`,
    email: `u${i}@example.com`,
    idpGroups: i % 10 === 0 ? [`idp${i % 7}`] : [],
  }));
  const tags = Array.from({ length: tagCount }, (_, i) => `tag:t${i}`);
  const groupsOf = new Map<number, string[]>();
  const groups: Record<string, string[]> = {};
  for (let g = 0; g < groupCount; g++) groups[`group:g${g}`] = g < 7 ? [`idp:idp${g}`] : [];
  for (const u of users) {
    const gs = [`group:g${Math.floor(rand() * groupCount)}`];
    if (rand() < 0.2) gs.push(`group:g${Math.floor(rand() * groupCount)}`);
    groupsOf.set(u.id, gs);
    for (const g of new Set(gs)) groups[g].push(`${u.name}@`);
  }
  const nodes = [];
  const routes = ['10.10.0.0/16', '10.20.0.0/16', '10.30.0.0/16', '192.168.10.0/24', '192.168.20.0/24'];
  for (let k = 0; k < n; k++) {
    const isTagged = k >= userDevices;
    const t = isTagged ? [tags[(k - userDevices) % tagCount]] : [];
    if (isTagged && rand() < 0.1) t.push(pick(tags));
    const router = isTagged && k - userDevices < 20;
    nodes.push({
      id: 1000 + k,
      ipv4: v4(k),
      ipv6: `fd7a:115c:a1e0::${Math.floor((k + 1) / 65536).toString(16)}:${((k + 1) % 65536).toString(16)}`,
      userId: isTagged ? 1 : (k % userCount) + 1,
      tags: [...new Set(t)],
      approvedRoutes: router ? [routes[(k - userDevices) % routes.length]] : [],
    });
  }
  const port = () => pick(['22', '80,443', '5432', '8000-8100', '*', '3306', '6379']);
  const acls: unknown[] = [];
  for (let i = 0; i < 200; i++) acls.push({ action: 'accept', src: [`group:g${i % groupCount}`], dst: [`${pick(tags)}:${port()}`] });
  for (let i = 0; i < 50; i++) acls.push({ action: 'accept', src: [pick(tags)], dst: [`${pick(tags)}:${port()}`] });
  for (let i = 0; i < 30; i++)
    acls.push({ action: 'accept', src: [`group:g${Math.floor(rand() * groupCount)}`], dst: [`group:g${Math.floor(rand() * groupCount)}:22`] });
  for (let i = 0; i < 5; i++) acls.push({ action: 'accept', src: [`group:g${i}`], dst: [`lan${i}:*`] });
  acls.push({ action: 'accept', src: ['autogroup:member'], dst: ['autogroup:self:*'] });
  const grants: unknown[] = [];
  grants.push({ src: ['autogroup:member'], dst: [tags[0]], ip: ['udp:53', 'tcp:53'] });
  grants.push({ src: ['group:g1'], dst: [tags[10]], app: { 'example.com/cap/admin': [{ role: 'admin' }] } });
  const tagOwners = Object.fromEntries(tags.map((t) => [t, ['group:g0']]));
  const hosts = Object.fromEntries(routes.map((r, i) => [`lan${i}`, r]));
  const ssh = Array.from({ length: 20 }, (_, i) => ({ action: 'accept', src: [`group:g${i}`], dst: [tags[i]], users: ['root', 'autogroup:nonroot'] }));
  ssh.push({ action: 'accept', src: ['autogroup:member'], dst: ['autogroup:self'], users: ['autogroup:nonroot'] });
  // Tests the generated policy passes: a group's member reaches the first tag of its first rule.
  const tests = Array.from({ length: 10 }, (_, i) => {
    const rule = acls[i] as { src: string[]; dst: string[] };
    const [tag, , ports] = rule.dst[0].split(':');
    const p = ports === '*' ? '1' : ports.split(/[,-]/)[0];
    return { src: rule.src[0], accept: [`${tag}:${rule.dst[0].split(':')[1]}:${p}`] };
  });
  const policy = {
    groups,
    tagOwners,
    hosts,
    acls,
    grants,
    ssh,
    tests,
    nodeAttrs: [{ target: ['group:g2', 'tag:t3'], attr: ['drive:share', 'drive:access'] }],
    autoApprovers: { routes: { '10.0.0.0/8': ['tag:t0', 'tag:t1'], '192.168.0.0/16': ['group:g0'] } },
  };
  return { snapshot: { nodes, users }, policy };
}
