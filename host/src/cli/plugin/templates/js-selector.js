// {{name}}: a chorus selector. It picks the panel from the host's model
// catalog - the models carrying any of the `tags` in its settings (every
// model when there are none), at most `count` of them, never more than the
// run's budget allows - and the first of them (or `synthesizers`) merges.
// When the run comes with images, PDFs or audio, models that can take them
// come first (contract 0.4's `input-modalities`).
//
//   [plugins.{{name}}.settings]
//   tags = ["reasoning"]      # optional
//   count = 3                 # optional, 1-16
//   synthesizers = []         # optional; default: the first model chosen
//
// Return an error by throwing a string (a thrown Error object would trap).

import { budget, models } from 'chorus:strategy/host@0.6.0';

// The settings, or a thrown string saying what is wrong (shown by `chorus check`).
function parse(text) {
  let settings;
  try {
    settings = JSON.parse(text || '{}');
  } catch (e) {
    throw `settings are not JSON: ${e}`;
  }
  const unknown = Object.keys(settings).filter((k) => !['tags', 'count', 'synthesizers'].includes(k));
  if (unknown.length > 0) throw `unknown setting(s) ${unknown.join(', ')}: expected tags, count, synthesizers`;
  const count = settings.count ?? 3;
  if (!Number.isInteger(count) || count < 1 || count > 16) throw `count must be an integer from 1 to 16, got ${count}`;
  for (const key of ['tags', 'synthesizers']) {
    const value = settings[key] ?? [];
    if (!Array.isArray(value) || !value.every((v) => typeof v === 'string')) throw `${key} must be a list of strings`;
  }
  return { tags: settings.tags ?? [], count, synthesizers: settings.synthesizers ?? [] };
}

const MODALITY = { image: 'image', pdf: 'file', audio: 'audio' };

// Whether `model` takes every attachment of the run (a text file, every model reads).
const sees = (model, request) => request.attachments
  .every((a) => a.kind === 'text' || (model.inputModalities ?? []).includes(MODALITY[a.kind]));

export const selector = {
  validateSettings(settings) {
    parse(settings);
  },

  select(request, settings) {
    const { tags, count: wanted, synthesizers } = parse(settings);
    // Leave a call for the merge.
    const count = Math.min(wanted, Math.max(budget().callsLeft - 1, 1));
    const candidates = models()
      .filter((m) => tags.length === 0 || m.tags.some((t) => tags.includes(t)))
      .sort((a, b) => sees(b, request) - sees(a, request)) // stable: catalog order otherwise
      .slice(0, count);
    const chosen = candidates.map((m) => m.id);
    if (chosen.length === 0) throw `no model in the catalog has any of the tags ${tags.join(', ')}`;
    const notes = [`{{name}} chose ${chosen.join(', ')}.`];
    if (count < wanted) notes.push(`The run's budget allowed ${count} of the ${wanted} models asked for.`);
    const blind = candidates.filter((m) => !sees(m, request)).map((m) => m.id);
    if (blind.length > 0) {
      notes.push(`${blind.join(', ')} cannot take the run's attachments: they get what the pipeline's attachments_for_text_models says.`);
    }
    return {
      panel: chosen.map((model) => ({ model, sampling: {} })),
      synthesizers: synthesizers.length > 0 ? synthesizers : chosen.slice(0, 1),
      notes,
    };
  },
};
