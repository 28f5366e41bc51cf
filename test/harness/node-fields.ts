// What the state layer's createNode needs for a plain node registered with a pre-auth key: for tests that make nodes
// in Redis directly, without a client registering.

/** A key string of the wire form `<prefix>:<64 hex digits>`, distinct per `n`. */
export const testKey = (n: number, prefix = 'nodekey') => `${prefix}:${n.toString(16).padStart(64, '0')}`;

export function nodeFields(i: number, userId: number, hostname = 'laptop') {
  return {
    userId,
    machineKey: testKey(i, 'mkey'),
    nodeKey: testKey(i),
    discoKey: '',
    hostname,
    hostinfo: null,
    endpoints: [],
    homeDerp: 0,
    capVersion: 130,
    expiry: null,
    ephemeral: false,
    authKeyId: null,
    registeredBy: 'authkey' as const,
    tags: [],
    approvedRoutes: [],
  };
}
