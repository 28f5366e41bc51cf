// Before asking a CA to validate the public host name: does that name resolve, here, and to this machine? The CA
// has the final word (its own DNS view, its own route to port 80), so this never blocks an order; it puts the most
// common cause of a failed validation in the log in plain words before the CA's own message arrives.
import dns from 'node:dns/promises';
import os from 'node:os';
import ipaddr from 'ipaddr.js';

export interface DomainCheck {
  level: 'ok' | 'info' | 'error';
  message: string;
  addresses: string[];
}

function localAddresses(): Set<string> {
  const out = new Set<string>();
  for (const list of Object.values(os.networkInterfaces())) {
    for (const a of list ?? []) out.add(ipaddr.process(a.address.split('%')[0]).toString());
  }
  return out;
}

export async function checkDomain(host: string): Promise<DomainCheck> {
  let addresses: string[];
  try {
    addresses = (await dns.lookup(host, { all: true, verbatim: true })).map((a) => ipaddr.process(a.address).toString());
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code ?? (e as Error).message;
    return {
      level: 'error',
      message: `${host} does not resolve from this machine (${code}): the CA must reach http://${host}/.well-known/acme-challenge/ on port 80, so give ${host} an A or AAAA record pointing here; ordering anyway, the CA's own DNS view decides`,
      addresses: [],
    };
  }
  const local = localAddresses();
  if (addresses.some((a) => local.has(a))) return { level: 'ok', message: `${host} resolves to this machine`, addresses };
  return {
    level: 'info',
    message: `${host} resolves to ${addresses.join(', ')}, which is not an address of this machine; fine behind NAT or port forwarding as long as port 80 there reaches this router`,
    addresses,
  };
}
