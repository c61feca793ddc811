// {{name}}: a chorus prompter. Every seat on the panel gets the user's
// question after a system prompt from its settings, with the run's
// attachments (images, PDFs, files) placed before the question: the host
// sends each one as the model takes it, or, to a model that cannot, what
// the pipeline's `attachments_for_text_models` says.
//
//   [plugins.{{name}}.settings]
//   system = "Answer concisely, and say how sure you are."   # optional
//
// Return an error by throwing a string (a thrown Error object would trap).

const DEFAULT_SYSTEM = 'Answer the question well: directly, correctly and completely. Say how sure you are.';

// The settings, or a thrown string saying what is wrong (shown by `chorus check`).
function parse(text) {
  let settings;
  try {
    settings = JSON.parse(text || '{}');
  } catch (e) {
    throw `settings are not JSON: ${e}`;
  }
  const unknown = Object.keys(settings).filter((k) => k !== 'system');
  if (unknown.length > 0) throw `unknown setting(s) ${unknown.join(', ')}: expected an optional \`system\` prompt`;
  const system = settings.system ?? DEFAULT_SYSTEM;
  if (typeof system !== 'string' || system.trim() === '') throw 'system must be a non-empty string: leave it out for the default';
  return { system };
}

const message = (role, text) => ({ role, content: [{ tag: 'text', val: text }] });

// The user's message: the run's attachments (by id; the host inlines them), then the question.
const question = (request) => ({
  role: 'user',
  content: [...request.attachments.map((a) => ({ tag: 'attachment', val: a.id })), { tag: 'text', val: request.prompt }],
});

export const prompter = {
  validateSettings(settings) {
    parse(settings);
  },

  prompt(request, plan, settings) {
    const { system } = parse(settings);
    const requests = plan.panel.map((seat) => ({
      label: 'panel',
      model: seat.model,
      messages: [message('system', system), question(request)],
      sampling: seat.sampling,
    }));
    return { requests, notes: [] };
  },
};
