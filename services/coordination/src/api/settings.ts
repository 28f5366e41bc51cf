// Tailnet settings in Tailscale's API shape (GET/PATCH /api/v2/tailnet/-/settings), as far as hse has them. They are
// the server's settings (environment variables), not changeable at run time: GET shows them, PATCH accepts a body
// that changes nothing and refuses any change with the variable that makes it.
import { HseError } from '../../../../shared/errors.ts';
import type { Config } from '../../../../shared/config.ts';
import { type ApiRoutes, jsonBody } from './api-kit.ts';

export function settingsJson(cfg: Pick<Config, 'nodeKeyExpirySeconds' | 'policyFile'>): Record<string, unknown> {
  return {
    devicesApprovalOn: false,
    devicesAutoUpdatesOn: false,
    // Tailscale counts whole days (1 to 180); hse's HSE_NODE_KEY_EXPIRY may be finer or 0 (never), shown as 0.
    devicesKeyDurationDays: Math.round(cfg.nodeKeyExpirySeconds / 86_400),
    usersApprovalOn: false,
    usersRoleAllowedToJoinExternalTailnets: 'none',
    networkFlowLoggingOn: false,
    regionalRoutingOn: false,
    postureIdentityCollectionOn: false,
    httpsEnabled: false,
    aclsExternallyManagedOn: cfg.policyFile !== null,
    aclsExternalLink: '',
  };
}

export function settingsRoutes(cfg: Pick<Config, 'nodeKeyExpirySeconds' | 'policyFile'>): ApiRoutes {
  return {
    'GET /api/v2/tailnet/:t/settings': { handler: async () => ({ json: settingsJson(cfg) }) },
    'PATCH /api/v2/tailnet/:t/settings': {
      handler: async (c) => {
        const now = settingsJson(cfg);
        for (const [k, v] of Object.entries(jsonBody(c))) {
          if (!(k in now)) throw new HseError(400, `unknown setting "${k}"`);
          if (JSON.stringify(now[k]) === JSON.stringify(v)) continue;
          const why =
            k === 'devicesKeyDurationDays'
              ? 'the key lifetime is the server setting HSE_NODE_KEY_EXPIRY'
              : k.startsWith('acls')
                ? 'whether the policy is a file is the server setting HSE_POLICY_FILE'
                : 'hse does not have this feature';
          throw new HseError(400, `"${k}" cannot be changed through the API: ${why}`);
        }
        return { json: now };
      },
    },
  };
}
