// The console's sections, in the order the navigation shows them. A section appears once its pages exist (`ready`),
// so nobody clicks into a dead end. Every signed-in role sees every section; auditors see them without buttons.
export interface Section {
  id: string;
  label: string;
  href: string;
  ready: boolean;
  /** Roles that see the section; undefined = everyone signed in. */
  roles?: ('admin' | 'auditor')[];
}

export const SECTIONS: Section[] = [
  { id: 'machines', label: 'Machines', href: '/console/machines', ready: true },
  { id: 'routes', label: 'Routes', href: '/console/routes', ready: true },
  { id: 'users', label: 'Users', href: '/console/users', ready: true },
  { id: 'keys', label: 'Keys', href: '/console/keys', ready: true },
  { id: 'acls', label: 'Access controls', href: '/console/acls', ready: true },
  { id: 'dns', label: 'DNS', href: '/console/dns', ready: true },
  { id: 'apikeys', label: 'API keys', href: '/console/apikeys', ready: true },
  { id: 'webhooks', label: 'Webhooks', href: '/console/webhooks', ready: true },
  { id: 'logs', label: 'Logs', href: '/console/logs', ready: true },
  { id: 'accounts', label: 'Accounts', href: '/console/accounts', ready: true },
];

/** Where "/console" leads a signed-in person: the first section that exists. */
export function homePath(): string {
  return SECTIONS.find((s) => s.ready)?.href ?? '/console/logs';
}
