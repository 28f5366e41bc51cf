// The console's sections, in the order the navigation shows them. A section appears once its pages exist (issue 9
// adds machines, users, keys and accounts by flipping `ready` and adding routes), so nobody clicks into a dead end.
export interface Section {
  id: string;
  label: string;
  href: string;
  ready: boolean;
  /** Roles that see the section; undefined = everyone signed in. */
  roles?: ('admin' | 'auditor')[];
}

export const SECTIONS: Section[] = [
  { id: 'machines', label: 'Machines', href: '/console/machines', ready: false },
  { id: 'users', label: 'Users', href: '/console/users', ready: false },
  { id: 'keys', label: 'Keys', href: '/console/keys', ready: false },
  { id: 'logs', label: 'Logs', href: '/console/logs', ready: true },
  { id: 'accounts', label: 'Accounts', href: '/console/accounts', ready: false },
];

/** Where "/console" leads a signed-in person: the first section that exists. */
export function homePath(): string {
  return SECTIONS.find((s) => s.ready)?.href ?? '/console/logs';
}
