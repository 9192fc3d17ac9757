// Module hook for a checkout of the repository (see cronq.js): resolves with the
// `cronq-source` export condition, so `import 'cronq'` in schedule files means src/.
export function resolve(specifier, context, next) {
  return next(specifier, { ...context, conditions: [...context.conditions, 'cronq-source'] });
}
