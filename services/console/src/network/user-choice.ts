// The user a form chose: a new name typed in (created now, or the existing user of that name), else the selected one.
// Creating goes through the admin API like everything else, so the activity log shows it as its own entry.
import { AdminError, type Actor, type AdminClient } from '../../../../shared/admin-client.ts';
import { field } from '../request/form-body.ts';
import { FormProblem } from '../request/form-route.ts';

export async function chosenUser(admin: AdminClient, who: Actor, form: URLSearchParams): Promise<{ ref: string | number; name: string; created: boolean }> {
  const typed = field(form, 'newUser').trim();
  if (typed !== '') {
    try {
      const u = await admin.createUser(who, typed);
      return { ref: u.id, name: u.name, created: true };
    } catch (e) {
      // Typing the name of a user that exists means that user.
      if (e instanceof AdminError && e.status === 409) return { ref: typed.toLowerCase(), name: typed.toLowerCase(), created: false };
      throw e;
    }
  }
  const chosen = field(form, 'user').trim();
  if (chosen === '') throw new FormProblem('Choose a user, or type the name of a new one.');
  return { ref: chosen, name: chosen, created: false };
}
