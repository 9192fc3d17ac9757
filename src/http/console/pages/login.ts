/** `/login`: the form that sets the session cookie from a typed `name:secret` token. */
import type { ConsoleContext, PageResult } from '../context.ts';
import { html } from '../html.ts';
import { page } from '../layout.ts';

export function loginPage(ctx: ConsoleContext, failed = false): PageResult {
  const body = ctx.viewer.actionsEnabled
    ? html`${failed ? html`<p class="bad" role="alert">That token is not the console's.</p>` : ''}
<form method="post" action="/login"><p><label for="token">Console token (name:secret)</label><br>
<input id="token" type="password" name="token" required autocomplete="current-password"></p><p><button type="submit">Sign in</button></p></form>`
    : html`<p>No console token is configured (CRONQ_CONSOLE_TOKEN or --console-token-file): the console is read-only.</p>`;
  return { status: failed ? 403 : 200, body: page('Sign in', ctx.viewer, body) };
}
